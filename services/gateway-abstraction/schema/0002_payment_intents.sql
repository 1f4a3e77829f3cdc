-- What carrying out payments needs beyond 0001 (docs/architecture.md, "Payments"):
--
-- * A payment is recorded REQUESTED at version 0, before the provider is called: its first event
--   (payment.authorized, payment.pending, payment.failed) is version 1.
-- * The customer and the slip a konbini or bank transfer payment is paid with (shown by orders,
--   re-sent with payment.pending).
-- * The reconciliation sweep asks the provider about payments in a non-terminal state whose
--   CheckAfter has passed (NULL once the payment is terminal: the index holds only open payments).
--   CheckShard (0..15, from the payment id) spreads the index so that its timestamp key is not
--   one hot spot.
-- * A provider call's intent keeps the exact request it sends, so a resumed call sends the same
--   parameters with the same idempotency key (a provider refuses a key reused with others), and
--   RetryAfter (NULL once the call got an answer) is when the sweep resumes it.

ALTER TABLE Payments DROP CONSTRAINT CK_Payments_Version;

ALTER TABLE Payments ADD CONSTRAINT CK_Payments_Version CHECK (Version >= 0);

ALTER TABLE Payments ADD COLUMN CustomerId STRING(64);

ALTER TABLE Payments ADD COLUMN Slip JSON;

ALTER TABLE Payments ADD COLUMN CheckShard INT64;

ALTER TABLE Payments ADD COLUMN CheckAfter TIMESTAMP;

CREATE NULL_FILTERED INDEX PaymentsToCheck ON Payments (CheckShard, CheckAfter);

ALTER TABLE ProviderRequests ADD COLUMN Request JSON;

ALTER TABLE ProviderRequests ADD COLUMN RetryAfter TIMESTAMP;

ALTER TABLE ProviderRequests ADD COLUMN RetryShard INT64;

CREATE NULL_FILTERED INDEX ProviderRequestsToResume ON ProviderRequests (RetryShard, RetryAfter);
