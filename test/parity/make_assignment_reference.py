"""Cost matrices and SciPy's linear_sum_assignment of each (the Hungarian matcher's oracle for the
DETR families): random ones, wide and tall, DETR-sized (300 queries x a few targets), and matrices
with ties (small integers, constant, repeated rows and columns, +inf forbidden pairs), where
another optimal solver may pick another assignment.

    make_assignment_reference.py OUT_DIR

Costs are written as float.hex, so that the C++ side reads the very same doubles.
"""
import json
import sys

try:
    import numpy as np
    from scipy.optimize import linear_sum_assignment
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)


def matrices():
    rng = np.random.default_rng(20261203)
    for rows, cols in [(1, 1), (1, 7), (7, 1), (3, 3), (5, 9), (9, 5), (20, 20), (40, 25), (25, 40)]:
        yield f"uniform {rows}x{cols}", rng.random((rows, cols))
    for targets in (1, 3, 8, 17):  # DETR: 300 queries (rows) x the image's targets, and its transpose
        cost = 2 * rng.random((300, targets)) + 5 * rng.random((300, targets)) - 2 * rng.random((300, targets))
        yield f"queries 300x{targets}", cost
        yield f"queries transposed {targets}x300", cost.T.copy()
    for rows, cols, high in [(6, 6, 2), (8, 12, 3), (12, 8, 3), (30, 30, 4), (10, 40, 2), (40, 10, 2), (50, 50, 10)]:
        yield f"integers 0..{high} {rows}x{cols}", rng.integers(0, high + 1, (rows, cols)).astype(float)
    for rows, cols in [(5, 5), (4, 9), (9, 4)]:
        yield f"constant {rows}x{cols}", np.full((rows, cols), 3.0)
    base = rng.random((4, 6))
    yield "repeated rows", np.vstack([base, base, base[:1]])
    yield "repeated columns", np.hstack([base, base, base[:, :2]])
    forbidden = rng.integers(0, 3, (10, 14)).astype(float)
    forbidden[rng.random((10, 14)) < 0.3] = np.inf
    for row in range(10):  # keep it feasible: a diagonal of finite costs
        forbidden[row, row] = 1.0
    yield "+inf forbidden pairs", forbidden
    yield "+inf forbidden pairs, tall", forbidden.T.copy()
    yield "negative and large", rng.normal(0, 1e6, (15, 21))
    yield "all zero", np.zeros((7, 11))


cases = []
for name, cost in matrices():
    rows, cols = linear_sum_assignment(cost)
    cases.append({"name": name, "shape": list(cost.shape), "cost": [float(v).hex() for v in cost.ravel()],
                  "rows": rows.tolist(), "cols": cols.tolist(), "total": float(cost[rows, cols].sum())})
with open(f"{sys.argv[1]}/assignment.json", "w") as f:
    json.dump(cases, f)
print(f"{len(cases)} matrices from scipy {__import__('scipy').__version__}")
