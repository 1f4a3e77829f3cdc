-- The timeline of an order: every event the orders service emitted for it and every event it
-- consumed about it, written in the same read-write transaction as the state change (and outbox row)
-- it records, so GET /v1/orders/{id} can show the history without reading the outbox (whose
-- published rows expire after 7 days). Interleaved: one read with the order.
CREATE TABLE OrderTimeline (
  OrderId          STRING(36)  NOT NULL,
  Seq              INT64       NOT NULL,  -- 1, 2, ... per order, in the order the rows were written
  Direction        STRING(8)   NOT NULL,  -- 'emitted' or 'consumed'
  EventType        STRING(128) NOT NULL,  -- 'order.created', 'inventory.reserved', ...
  EventId          STRING(36)  NOT NULL,
  AggregateType    STRING(64)  NOT NULL,  -- the event's aggregate: 'order' when emitted
  AggregateVersion INT64       NOT NULL,  -- the event's aggregate version
  RecordedAt       TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT CK_OrderTimeline_Seq CHECK (Seq > 0),
  CONSTRAINT CK_OrderTimeline_Direction CHECK (Direction IN ('emitted', 'consumed')),
) PRIMARY KEY (OrderId, Seq),
  INTERLEAVE IN PARENT Orders ON DELETE CASCADE;
