-- Captured money can be given back: CAPTURED → REFUND_REQUESTED (the intent, before the provider is
-- called) → REFUNDED, and the provider call is an intent of its own (docs/architecture.md,
-- "Payments (as built)").

ALTER TABLE Payments DROP CONSTRAINT CK_Payments_Status;

ALTER TABLE Payments ADD CONSTRAINT CK_Payments_Status CHECK (Status IN ('REQUESTED', 'PENDING', 'AUTHORIZED',
  'FAILED', 'EXPIRED', 'CAPTURE_REQUESTED', 'CAPTURED', 'CAPTURE_FAILED', 'VOID_REQUESTED', 'VOIDED',
  'REFUND_REQUESTED', 'REFUNDED'));

ALTER TABLE ProviderRequests DROP CONSTRAINT CK_ProviderRequests_Operation;

ALTER TABLE ProviderRequests ADD CONSTRAINT CK_ProviderRequests_Operation CHECK (Operation IN ('AUTHORIZE',
  'CAPTURE', 'VOID', 'REFUND'));
