-- Shipments as the warehouse works them (issue 12): order.confirmed creates an order's shipment
-- PENDING; the warehouse ships it (SHIPPED, with carrier and tracking number) or reports that it
-- cannot (FAILED); order.cancelled cancels a PENDING one (CANCELLED).
--
-- * ShipmentId is not a UUIDv4, as 0001 says, but a UUIDv5 of the order id (one shipment per order,
--   however often order.confirmed is delivered).
-- * FAILED is new; FailureReason keeps why ("carrier_rejected", ...), so that the same failure
--   reported again is recognised as a repeat and another one as a conflict.
-- * ShippedAt is the commit timestamp of the transaction that shipped it (0001 did not allow that).
-- * ShipmentsByStatus lets the simulated carrier of the dev stack find the PENDING shipments older
--   than its delay, oldest first. A shipment is written a handful of times in its life (one per
--   order), so the status-and-time key is no hot spot worth sharding.

ALTER TABLE Shipments DROP CONSTRAINT CK_Shipments_Status;

ALTER TABLE Shipments ADD CONSTRAINT CK_Shipments_Status CHECK (Status IN ('PENDING', 'SHIPPED', 'CANCELLED', 'FAILED'));

ALTER TABLE Shipments ADD COLUMN FailureReason STRING(64);

ALTER TABLE Shipments ALTER COLUMN ShippedAt SET OPTIONS (allow_commit_timestamp = true);

CREATE INDEX ShipmentsByStatus ON Shipments (Status, CreatedAt);
