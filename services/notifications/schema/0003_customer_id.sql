-- The customer id as orders now keeps it: up to 128 characters (an Identity Platform uid).
ALTER TABLE OrderContacts ALTER COLUMN CustomerId STRING(128) NOT NULL;
