import itertools
import time
import uuid

from subagents.ids import id_matches, new_agent_id, short_id


def test_agent_ids_are_unique_time_ordered_version_7_uuids() -> None:
    t0 = time.time_ns() // 1_000_000
    ids = [new_agent_id() for _ in range(5000)]  # crosses a refill of the random pool
    t1 = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids) or all(a[:13] <= b[:13] for a, b in itertools.pairwise(ids))
    for a in ids:
        u = uuid.UUID(a)
        assert (u.version, u.variant, str(u)) == (7, uuid.RFC_4122, a)
        assert t0 <= int(u.hex[:12], 16) <= t1  # the first 48 bits: Unix time in ms


def test_short_ids_are_the_random_end_and_refs_match_prefix_or_suffix() -> None:
    ids = [new_agent_id() for _ in range(2000)]
    assert len({short_id(a) for a in ids}) == len(ids)  # made in the same instant, still told apart
    a = ids[0]
    assert short_id(a) == a[-8:]
    assert id_matches(a, short_id(a))
    assert id_matches(a, a[:8])
    assert id_matches(a, a)
    assert not id_matches(a, a[-3:])
    assert not id_matches(a, "zzzz")
