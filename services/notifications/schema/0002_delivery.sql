-- What sending the e-mails needs beyond 0001 (docs/architecture.md, "Side effects outside Spanner";
-- services/notifications/README.md):
--
-- * OrderContacts: the address and language of each order, recorded from its order.created. It is
--   the one place this service reads them from: payment.* events do not carry them, and the
--   order.* events after order.created are not read for them. Email is '' for an order placed
--   without one; nothing is ever sent for such an order.
-- * A notification keeps its HTML part beside the text part (Body), the language it was rendered
--   in, the type of the event that caused it, and its Message-ID (derived from the key), so that a
--   resend is the same message. ProviderMessageId is the mail server's answer to the message (its
--   queue id), for tracing a message through the relay.
-- * BOUNCED: the server refused the address (5xx to RCPT or DATA), never retried. FAILED: every
--   attempt failed temporarily (4xx, connection errors). Both are final.
-- * NextAttemptAt (NULL once final or sent) is when a PENDING notification may be tried again;
--   RetryShard (0..15, from the event id) spreads the sweep's index so that its timestamp key is not
--   one hot spot.

CREATE TABLE OrderContacts (
  OrderId    STRING(36)  NOT NULL,
  CustomerId STRING(64)  NOT NULL,
  Email      STRING(320) NOT NULL,  -- '' when the order was placed without one
  Language   STRING(16)  NOT NULL,  -- as orders gave it ('ja', 'en'); rendering falls back to 'ja'
  EventId    STRING(36)  NOT NULL,  -- the order.created it was recorded from
  CreatedAt  TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
) PRIMARY KEY (OrderId);

ALTER TABLE Notifications ADD COLUMN EventType STRING(64);

ALTER TABLE Notifications ADD COLUMN Language STRING(16);

ALTER TABLE Notifications ADD COLUMN HtmlBody STRING(MAX);

ALTER TABLE Notifications ADD COLUMN MessageId STRING(256);

ALTER TABLE Notifications ADD COLUMN NextAttemptAt TIMESTAMP;

ALTER TABLE Notifications ADD COLUMN RetryShard INT64;

ALTER TABLE Notifications DROP CONSTRAINT CK_Notifications_Status;

ALTER TABLE Notifications ADD CONSTRAINT CK_Notifications_Status CHECK (Status IN ('PENDING', 'SENT', 'BOUNCED', 'FAILED'));

CREATE NULL_FILTERED INDEX NotificationsToResume ON Notifications (RetryShard, NextAttemptAt);
