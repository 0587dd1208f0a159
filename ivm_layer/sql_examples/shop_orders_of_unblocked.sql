-- Orders of customers not on the block list, with SQL's NOT IN rules: one NULL customer on the
-- list hides every order (NOT IN is then never true), an empty list shows them all.
SELECT o.order_id, o.customer, o.total * 2 AS doubled
FROM orders o
WHERE o.customer NOT IN (SELECT b.customer FROM blocked b)
