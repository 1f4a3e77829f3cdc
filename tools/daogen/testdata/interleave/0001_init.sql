-- Interleaving three levels deep and every kind of index.
CREATE TABLE Customers (
  CustomerId STRING(36) NOT NULL,
  Email      STRING(320) NOT NULL,
  Phone      STRING(32),
  Region     STRING(8) NOT NULL,
) PRIMARY KEY (CustomerId);

CREATE UNIQUE INDEX CustomersByEmail ON Customers (Email);
CREATE UNIQUE NULL_FILTERED INDEX CustomersByPhone ON Customers (Region, Phone);

CREATE TABLE Addresses (
  CustomerId STRING(36) NOT NULL,
  AddressNo  INT64      NOT NULL,
  City       STRING(64) NOT NULL,
  Zip        STRING(16),
) PRIMARY KEY (CustomerId, AddressNo),
  INTERLEAVE IN PARENT Customers ON DELETE CASCADE;

CREATE NULL_FILTERED INDEX AddressesByZip ON Addresses (Zip);

CREATE TABLE Deliveries (
  CustomerId STRING(36) NOT NULL,
  AddressNo  INT64      NOT NULL,
  DeliveryId STRING(36) NOT NULL,
  Status     STRING(16) NOT NULL,
  DeliveredAt TIMESTAMP NOT NULL,
) PRIMARY KEY (CustomerId, AddressNo, DeliveryId),
  INTERLEAVE IN PARENT Addresses;

CREATE INDEX DeliveriesByStatus ON Deliveries (Status, DeliveredAt DESC);
