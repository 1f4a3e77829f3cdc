-- Who moved a shipment (issue 24): the warehouse's actions take a Google ID token of an allowed
-- account, and the shipment keeps that account, from the verified identity and never from a field
-- the caller writes.
--
-- * ShippedBy is set when the shipment becomes SHIPPED, FailedBy when it becomes FAILED: the
--   warehouse's (or an operator's) e-mail, or "carrier-simulator" for the simulated carrier of the
--   dev stack, which calls the use case without HTTP. A repeated request, by the same account or
--   another, changes neither.
-- * Two columns rather than one "ActedBy": each names its fact, beside ShippedAt and FailureReason.
-- * STRING(320), as OutboxEvents.ReplayedBy: the longest e-mail address. NULL until the shipment
--   is in that state, and for a shipment shipped or failed before this migration.

ALTER TABLE Shipments ADD COLUMN ShippedBy STRING(320);

ALTER TABLE Shipments ADD COLUMN FailedBy STRING(320);
