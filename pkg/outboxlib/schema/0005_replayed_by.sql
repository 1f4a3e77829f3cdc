-- Who replayed an outbox row or a missing delivery: the operator's verified identity ("operator",
-- or "operator via console" when the console acted on the operator's behalf), never a field the
-- caller writes. NULL for replays made before this migration and for replays outside an operator
-- request (tests, tools calling the relay's library directly).
ALTER TABLE OutboxEvents ADD COLUMN ReplayedBy STRING(320);
ALTER TABLE MissingDeliveries ADD COLUMN ReplayedBy STRING(320);
