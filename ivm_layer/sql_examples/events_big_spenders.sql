-- Purchases above a user's click count times ten, with the user's last page upper-cased: a
-- condition between two tables that is not column ± constant is a residual filter applied to
-- the join's changed rows (EXPLAIN: "residual filter").
SELECT p.user_id, p.amount, upper(c.page) AS page
FROM purchases p JOIN clicks c ON p.user_id = c.user_id
WHERE p.amount > c.ts * 10 OR c.page = '/cart'
