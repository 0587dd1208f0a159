"""Batched enumeration vs a Python list on Q1 (issue 13 point 4).

    python -m ivm_layer.bench.enum_speed 1414     # n rows per side; about n*n/2 output rows (1M for 1414)

Prints the best of 3 runs of: iterating a list of the same (row, k) pairs, iterating
view.rows_batches(1024) (production + the same consumer loop), producing the batches only,
and view.rows().
"""
import random
import sys
import time

import ivm_layer


def main(argv: list[str] | None = None) -> None:
    n=int((sys.argv[1:] if argv is None else argv)[0])
    sch={"R":["a","b","c"],"S":["d","e","f"]}
    v=ivm_layer.compile_view("SELECT * FROM R, S WHERE R.a < S.d", sch)
    rng=random.Random(1)
    v.apply({"R":[((rng.randrange(10*n), rng.randrange(20), rng.randrange(1000)),1) for _ in range(n)]})
    v.apply({"S":[((rng.randrange(10*n), rng.randrange(20), rng.randrange(1000)),1) for _ in range(n)]})
    lst=list(v.rows())
    def t_list():
        c=0
        for row,k in lst: c+=1
    def t_batches():
        c=0
        for b in v.rows_batches(1024):
            for row,k in b: c+=1
    def t_prod():
        for b in v.rows_batches(1024): pass
    def t_rows():
        c=0
        for row,k in v.rows(): c+=1
    for f in (t_list,t_batches,t_prod,t_rows):
        ts=[]
        for _ in range(3):
            t0=time.perf_counter(); f(); ts.append(time.perf_counter()-t0)
        print(f.__name__, round(min(ts),3))


if __name__ == "__main__":
    main()
