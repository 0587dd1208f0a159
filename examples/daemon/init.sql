-- Example schema and data for docker-compose.yml (run by the postgres image at first start).
CREATE TABLE customers (id integer, name text);
CREATE TABLE orders (id integer, customer_id integer, card text, country text, ts timestamp);
CREATE TABLE shipments (id integer, order_id integer, shipped_at timestamp);
-- the daemon needs whole old rows of updates and deletes (or start it with --set-replica-identity)
ALTER TABLE customers REPLICA IDENTITY FULL;
ALTER TABLE orders REPLICA IDENTITY FULL;
ALTER TABLE shipments REPLICA IDENTITY FULL;
INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, 100) g;
INSERT INTO orders SELECT g, 1 + g % 100, 'card' || (g % 50), (ARRAY['DE', 'FR', 'US'])[1 + g % 3],
       timestamp '2024-01-01' + g * interval '7 minutes' FROM generate_series(1, 2000) g;
INSERT INTO shipments SELECT g, g, timestamp '2024-01-01' + g * interval '7 minutes' + interval '1 day'
       FROM generate_series(1, 1500) g;
