-- How the customer pays (POST /v1/orders "payment" and "email"), and the slip a konbini or bank
-- transfer payment is paid with (payment.pending). Orders placed before this migration have NULL in
-- every column; the aggregate restores them as orders without a payment choice.
--
-- PaymentDetail is the method's one detail: the Stripe PaymentMethod id of a card payment ("pm_..."),
-- the store chain of a konbini payment (KOMOJU's identifier: "lawson", "family-mart", ...); NULL for
-- wallet and bank transfer. PaymentInstructions is the slip as the gateway issued it (store, codes,
-- bank account, expiry), shown by GET /v1/orders/{id}; recording it is not a transition, so it is not
-- an order event and leaves Version unchanged.
ALTER TABLE Orders ADD COLUMN PaymentMethod STRING(16);
ALTER TABLE Orders ADD COLUMN PaymentDetail STRING(255);
ALTER TABLE Orders ADD COLUMN Email STRING(254);
ALTER TABLE Orders ADD COLUMN PaymentInstructions JSON;
ALTER TABLE Orders ADD CONSTRAINT CK_Orders_PaymentMethod
  CHECK (PaymentMethod IN ('card', 'wallet', 'konbini', 'bank_transfer'));
