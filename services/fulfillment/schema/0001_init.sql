-- fulfillment database: stock, reservations and shipments. Stock is held as a reservation
-- (Reserved) and only leaves OnHand when it ships.

CREATE TABLE Inventory (
  Sku       STRING(64) NOT NULL,
  OnHand    INT64      NOT NULL,
  Reserved  INT64      NOT NULL,
  UpdatedAt TIMESTAMP  NOT NULL OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT CK_Inventory_Stock CHECK (OnHand >= 0 AND Reserved >= 0 AND Reserved <= OnHand),
) PRIMARY KEY (Sku);

-- One row per (order, SKU); every line of an order is reserved, released or shipped together.
CREATE TABLE Reservations (
  OrderId   STRING(36) NOT NULL,
  Sku       STRING(64) NOT NULL,
  Quantity  INT64      NOT NULL,
  Status    STRING(16) NOT NULL,
  CreatedAt TIMESTAMP  NOT NULL OPTIONS (allow_commit_timestamp = true),
  UpdatedAt TIMESTAMP  NOT NULL OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT CK_Reservations_Quantity CHECK (Quantity > 0),
  CONSTRAINT CK_Reservations_Status CHECK (Status IN ('HELD', 'RELEASED', 'SHIPPED')),
) PRIMARY KEY (OrderId, Sku);

CREATE INDEX ReservationsBySku ON Reservations (Sku, Status);

CREATE TABLE Shipments (
  ShipmentId     STRING(36) NOT NULL,  -- UUIDv4
  OrderId        STRING(36) NOT NULL,
  Status         STRING(16) NOT NULL,
  Carrier        STRING(64),
  TrackingNumber STRING(64),
  Version        INT64      NOT NULL,
  CreatedAt      TIMESTAMP  NOT NULL OPTIONS (allow_commit_timestamp = true),
  UpdatedAt      TIMESTAMP  NOT NULL OPTIONS (allow_commit_timestamp = true),
  ShippedAt      TIMESTAMP,
  CONSTRAINT CK_Shipments_Status CHECK (Status IN ('PENDING', 'SHIPPED', 'CANCELLED')),
  CONSTRAINT CK_Shipments_Version CHECK (Version > 0),
) PRIMARY KEY (ShipmentId);

-- At most one shipment per order.
CREATE UNIQUE INDEX ShipmentsByOrder ON Shipments (OrderId);
