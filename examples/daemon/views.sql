-- Views maintained by the example daemon (docker-compose.yml at the repository root).
-- Every statement is CREATE INCREMENTAL [MATERIALIZED] VIEW over tables of the source
-- database; the daemon writes each view to the sinks as a table
-- (view columns, ivm_count, ivm_key).

-- Orders paid with a card used in the hour before (a self-join with an inequality window).
CREATE INCREMENTAL MATERIALIZED VIEW repeated_card_use AS
SELECT o.id AS order_id, o.card, o.country, p.country AS earlier_country, o.ts, p.ts AS earlier_ts
FROM orders o JOIN orders p ON o.card = p.card
WHERE p.ts < o.ts AND p.ts > o.ts - INTERVAL '1 hour';

-- Orders with their customer and the shipments sent after the order.
CREATE INCREMENTAL MATERIALIZED VIEW order_shipments AS
SELECT o.id AS order_id, c.name, s.id AS shipment_id, s.shipped_at
FROM orders o JOIN customers c ON o.customer_id = c.id
JOIN shipments s ON s.order_id = o.id AND s.shipped_at > o.ts;
