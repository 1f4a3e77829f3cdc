-- A customer id is the subject of the customer's Identity Platform ID token: a Firebase uid, 1 to
-- 128 characters. 64 refused the longer ones (422), so the column takes 128, as do the gateway's
-- and notifications' copies. Widening a STRING column is an online schema change on Spanner; the
-- index OrdersByCustomer keeps working through it.
ALTER TABLE Orders ALTER COLUMN CustomerId STRING(128) NOT NULL;
