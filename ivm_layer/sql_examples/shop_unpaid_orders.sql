-- Orders without a payment (an anti-join): NOT EXISTS with an equality correlation keeps, per
-- order id, the number of payments; an order enters the view when its last payment is deleted
-- and leaves it when one arrives.
SELECT o.order_id, o.customer, o.total
FROM orders o
WHERE NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.order_id AND p.amount > 0)
