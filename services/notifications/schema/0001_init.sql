-- notifications database: customer e-mails, each sent at most once per (event, template). The row is
-- the intent, recorded with the inbox entry; sending happens after commit (ARCHITECTURE.md §6).

CREATE TABLE Notifications (
  EventId           STRING(36)  NOT NULL,  -- the event that caused it (UUIDv4)
  Template          STRING(64)  NOT NULL,  -- 'order_confirmed', 'konbini_slip', ...
  OrderId           STRING(36)  NOT NULL,
  Recipient         STRING(320) NOT NULL,
  Subject           STRING(MAX) NOT NULL,
  Body              STRING(MAX) NOT NULL,
  Status            STRING(16)  NOT NULL,
  Attempts          INT64       NOT NULL,
  LastError         STRING(MAX),
  ProviderMessageId STRING(128),
  CreatedAt         TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  UpdatedAt         TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  SentAt            TIMESTAMP,
  CONSTRAINT CK_Notifications_Status CHECK (Status IN ('PENDING', 'SENT', 'FAILED')),
  CONSTRAINT CK_Notifications_Attempts CHECK (Attempts >= 0),
) PRIMARY KEY (EventId, Template);

CREATE INDEX NotificationsByOrder ON Notifications (OrderId);
