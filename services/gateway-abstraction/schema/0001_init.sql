-- payments database (owned by gateway-abstraction): payments behind one internal contract, the
-- provider webhooks already seen, and the idempotency keys of calls made to providers.

CREATE TABLE Payments (
  PaymentId         STRING(36)  NOT NULL,  -- UUIDv4; also the idempotency key base sent to the provider
  OrderId           STRING(36)  NOT NULL,
  Provider          STRING(32)  NOT NULL,
  Method            STRING(32)  NOT NULL,
  Status            STRING(32)  NOT NULL,
  AmountMinor       INT64       NOT NULL,
  Currency          STRING(3)   NOT NULL,
  ProviderPaymentId STRING(128),
  FailureReason     STRING(MAX),
  ExpiresAt         TIMESTAMP,             -- konbini / bank transfer slips expire
  Version           INT64       NOT NULL,
  CreatedAt         TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  UpdatedAt         TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT CK_Payments_Amount CHECK (AmountMinor >= 0),
  CONSTRAINT CK_Payments_Version CHECK (Version > 0),
  CONSTRAINT CK_Payments_Method CHECK (Method IN ('CARD', 'WALLET', 'KONBINI', 'BANK_TRANSFER')),
  CONSTRAINT CK_Payments_Status CHECK (Status IN ('REQUESTED', 'PENDING', 'AUTHORIZED', 'FAILED',
    'EXPIRED', 'CAPTURE_REQUESTED', 'CAPTURED', 'CAPTURE_FAILED', 'VOID_REQUESTED', 'VOIDED')),
) PRIMARY KEY (PaymentId);

CREATE INDEX PaymentsByOrder ON Payments (OrderId);

-- A provider's id for a payment is unique per provider once known.
CREATE UNIQUE NULL_FILTERED INDEX PaymentsByProviderPayment ON Payments (Provider, ProviderPaymentId);

-- Webhook de-duplication: a provider event is applied once. Keyed by a hash because provider event
-- ids are often sequential.
CREATE TABLE ProviderEvents (
  EventKey        STRING(64)  NOT NULL,  -- hex SHA-256 of provider + "\x00" + provider event id
  Provider        STRING(32)  NOT NULL,
  ProviderEventId STRING(128) NOT NULL,
  PaymentId       STRING(36),
  EventType       STRING(64)  NOT NULL,
  Payload         JSON        NOT NULL,
  ReceivedAt      TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
) PRIMARY KEY (EventKey),
  ROW DELETION POLICY (OLDER_THAN(ReceivedAt, INTERVAL 90 DAY));

-- Every call made to a provider, keyed by the idempotency key sent with it
-- ('<PaymentId>:<operation>'), so a retried or resumed call reuses the key and the recorded intent.
CREATE TABLE ProviderRequests (
  IdempotencyKey STRING(128) NOT NULL,
  PaymentId      STRING(36)  NOT NULL,
  Operation      STRING(16)  NOT NULL,
  Status         STRING(16)  NOT NULL,
  Attempts       INT64       NOT NULL,
  ResponseStatus INT64,
  ResponseBody   STRING(MAX),
  LastError      STRING(MAX),
  CreatedAt      TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  UpdatedAt      TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT CK_ProviderRequests_Operation CHECK (Operation IN ('AUTHORIZE', 'CAPTURE', 'VOID')),
  CONSTRAINT CK_ProviderRequests_Status CHECK (Status IN ('STARTED', 'SUCCEEDED', 'FAILED')),
  CONSTRAINT CK_ProviderRequests_Attempts CHECK (Attempts >= 0),
) PRIMARY KEY (IdempotencyKey);

CREATE INDEX ProviderRequestsByPayment ON ProviderRequests (PaymentId);
