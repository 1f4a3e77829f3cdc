-- orders database: the catalog, orders and their lines, and the idempotency keys of POST /v1/orders.
-- Money is INT64 minor units plus an ISO 4217 currency; every update is conditional on the previous
-- state; keys are UUIDv4 or hashes, never monotonic.

CREATE TABLE Products (
  Sku         STRING(64)  NOT NULL,
  Name        STRING(256) NOT NULL,
  Description STRING(MAX),
  PriceMinor  INT64       NOT NULL,
  Currency    STRING(3)   NOT NULL,
  Active      BOOL        NOT NULL,
  CreatedAt   TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  UpdatedAt   TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT CK_Products_Price CHECK (PriceMinor >= 0),
  CONSTRAINT CK_Products_Currency CHECK (CHAR_LENGTH(Currency) = 3),
) PRIMARY KEY (Sku);

CREATE TABLE Orders (
  OrderId      STRING(36)  NOT NULL,  -- UUIDv4
  CustomerId   STRING(64)  NOT NULL,
  Status       STRING(32)  NOT NULL,
  Currency     STRING(3)   NOT NULL,
  TotalMinor   INT64       NOT NULL,
  Version      INT64       NOT NULL,  -- aggregate version: the AggregateVersion of the last event emitted
  CancelReason STRING(64),
  CreatedAt    TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  UpdatedAt    TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT CK_Orders_Total CHECK (TotalMinor >= 0),
  CONSTRAINT CK_Orders_Version CHECK (Version > 0),
  CONSTRAINT CK_Orders_Status CHECK (Status IN ('PENDING', 'AWAITING_PAYMENT', 'CONFIRMED', 'SHIPPED',
    'COMPLETED', 'CANCELLING', 'CANCELLED', 'NEEDS_ATTENTION')),
) PRIMARY KEY (OrderId);

CREATE INDEX OrdersByCustomer ON Orders (CustomerId, CreatedAt DESC);

-- Lines live with their order (interleaved): one split, one read for the whole order.
CREATE TABLE OrderItems (
  OrderId        STRING(36) NOT NULL,
  LineNo         INT64      NOT NULL,
  Sku            STRING(64) NOT NULL,
  Quantity       INT64      NOT NULL,
  UnitPriceMinor INT64      NOT NULL,  -- the catalog price when the order was placed
  CONSTRAINT CK_OrderItems_Quantity CHECK (Quantity > 0),
  CONSTRAINT CK_OrderItems_Price CHECK (UnitPriceMinor >= 0),
) PRIMARY KEY (OrderId, LineNo),
  INTERLEAVE IN PARENT Orders ON DELETE CASCADE;

-- Idempotency-Key of POST /v1/orders. Keyed by a hash of (scope, client key) so client-chosen keys,
-- which may well be monotonic, cannot create a hotspot. A replay with the same key and the same
-- request hash gets the stored response; a different request hash is a client error.
CREATE TABLE IdempotencyKeys (
  KeyHash        STRING(64)  NOT NULL,  -- hex SHA-256 of scope + "\x00" + key
  Scope          STRING(64)  NOT NULL,  -- e.g. 'POST /v1/orders'
  ClientKey      STRING(255) NOT NULL,
  RequestHash    STRING(64)  NOT NULL,  -- hex SHA-256 of the canonical request
  OrderId        STRING(36),
  ResponseStatus INT64,
  ResponseBody   JSON,
  CreatedAt      TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
) PRIMARY KEY (KeyHash),
  ROW DELETION POLICY (OLDER_THAN(CreatedAt, INTERVAL 1 DAY));
