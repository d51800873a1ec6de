"""QOS and association priorities for multifactor: an association inherits its account's Priority."""

from __future__ import annotations

from ctld.priority_inputs import priority_inputs
from shoal.v1 import accounting_pb2 as pb


def test_inherited_association_priority() -> None:
    resp = pb.GetLimitsResponse(
        associations=[
            pb.Association(id=1, account="root"),
            pb.Association(id=2, account="physics", parent="root", priority=30),
            pb.Association(id=3, account="physics", user="alice"),
            pb.Association(id=4, account="physics", user="bob", priority=50),
            pb.Association(id=5, account="chem", parent="root"),
            pb.Association(id=6, account="chem", user="carol"),
        ],
        qos=[pb.Qos(name="normal"), pb.Qos(name="high", priority=100)],
    )
    got = priority_inputs(resp)
    assert got.assoc_priority == {1: 0, 2: 30, 3: 30, 4: 50, 5: 0, 6: 0}
    assert got.qos_priority == {"normal": 0, "high": 100}
