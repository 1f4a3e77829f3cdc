-- The rest of the saga (docs/architecture.md, "The order saga (as built)"): the customer's language
-- for e-mails, the shipment an order left with, the compensations a cancelling order waits for,
-- why an order needs attention, and an index for the stuck-order detector.
--
-- Language is "ja" or "en" (NULL for orders placed before this migration: Japanese, the shop's
-- default). Shipment is {shipment_id, carrier, tracking_number} from shipment.shipped. Compensations
-- is the list a cancellation recorded, e.g. [{"kind":"stock","state":"done","outcome":"released"},
-- {"kind":"payment","state":"pending"}]; NULL for an order that was never cancelling.
-- AttentionReason says why an order is NEEDS_ATTENTION ("capture_failed_expired",
-- "stock_release_failed_already_shipped", ...).
ALTER TABLE Orders ADD COLUMN Language STRING(8);
ALTER TABLE Orders ADD COLUMN Shipment JSON;
ALTER TABLE Orders ADD COLUMN Compensations JSON;
ALTER TABLE Orders ADD COLUMN AttentionReason STRING(64);
ALTER TABLE Orders ADD CONSTRAINT CK_Orders_Language CHECK (Language IN ('ja', 'en'));

-- The stuck-order detector reads, per non-terminal status, the orders that have not changed since
-- a threshold.
CREATE INDEX OrdersByStatus ON Orders (Status, UpdatedAt);
