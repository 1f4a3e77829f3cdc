-- Settling an order's money when it is cancelled (docs/architecture.md, "Payments (as built)"):
--
-- * CancelRequested: the order was cancelled while the payment's authorization was in flight
--   (REQUESTED). When the provider's answer, webhook or the sweep lands the payment AUTHORIZED or
--   PENDING, the gateway voids it at once. NULL is false (payments recorded before this column).
-- * A void or a refund can fail for good (the provider refuses it, or stays unreachable until the
--   intent is given up): VOID_FAILED and REFUND_FAILED, for an operator to settle by hand.

ALTER TABLE Payments ADD COLUMN CancelRequested BOOL;

ALTER TABLE Payments DROP CONSTRAINT CK_Payments_Status;

ALTER TABLE Payments ADD CONSTRAINT CK_Payments_Status CHECK (Status IN ('REQUESTED', 'PENDING', 'AUTHORIZED',
  'FAILED', 'EXPIRED', 'CAPTURE_REQUESTED', 'CAPTURED', 'CAPTURE_FAILED', 'VOID_REQUESTED', 'VOIDED', 'VOID_FAILED',
  'REFUND_REQUESTED', 'REFUNDED', 'REFUND_FAILED'));
