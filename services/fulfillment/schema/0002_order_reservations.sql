-- One row per order fulfillment has decided on: the reservation aggregate (events
-- inventory.reserved / inventory.rejected / inventory.released, aggregate type "reservation",
-- aggregate id = order id). It records a rejection too, which leaves no Reservations rows, so an
-- order.created replayed with a new event id can never turn a rejected order into a reserved one,
-- and it carries the aggregate version of the last event emitted.
CREATE TABLE OrderReservations (
  OrderId   STRING(36) NOT NULL,
  Status    STRING(16) NOT NULL,
  Version   INT64      NOT NULL,  -- aggregate version: the AggregateVersion of the last event emitted
  CreatedAt TIMESTAMP  NOT NULL OPTIONS (allow_commit_timestamp = true),
  UpdatedAt TIMESTAMP  NOT NULL OPTIONS (allow_commit_timestamp = true),
  CONSTRAINT CK_OrderReservations_Status CHECK (Status IN ('HELD', 'REJECTED', 'RELEASED', 'SHIPPED')),
  CONSTRAINT CK_OrderReservations_Version CHECK (Version > 0),
) PRIMARY KEY (OrderId);
