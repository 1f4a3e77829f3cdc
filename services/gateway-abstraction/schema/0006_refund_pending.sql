-- A refund the provider accepted and pays out later (docs/architecture.md, "Payments (as built)"):
-- KOMOJU gives a konbini or bank transfer payment's money back by bank transfer to the customer's
-- account, by hand, a business day or two after the request, and may still reject it.
-- REFUND_REQUESTED → REFUND_PENDING → REFUNDED | REFUND_FAILED; the money is held until REFUNDED.

ALTER TABLE Payments DROP CONSTRAINT CK_Payments_Status;

ALTER TABLE Payments ADD CONSTRAINT CK_Payments_Status CHECK (Status IN ('REQUESTED', 'PENDING', 'AUTHORIZED',
  'FAILED', 'EXPIRED', 'CAPTURE_REQUESTED', 'CAPTURED', 'CAPTURE_FAILED', 'VOID_REQUESTED', 'VOIDED', 'VOID_FAILED',
  'REFUND_REQUESTED', 'REFUND_PENDING', 'REFUNDED', 'REFUND_FAILED'));
