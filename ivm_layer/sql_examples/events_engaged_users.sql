-- Users who viewed a product page or bought something (UNION: a row while either branch has
-- it), the product views named in a WITH that is inlined into its branch.
WITH product_views AS (
    SELECT user_id FROM clicks WHERE page LIKE '/product%' OR page = '/cart'
)
SELECT user_id FROM product_views
UNION
SELECT p.user_id FROM purchases p
