import uuid

from subagents.runtime.ids import new_agent_id


def test_agent_ids_are_unique_version_4_uuids() -> None:
    ids = [new_agent_id() for _ in range(5000)]  # crosses a refill of the random pool
    assert len(set(ids)) == len(ids)
    for a in ids:
        u = uuid.UUID(a)
        assert (u.version, u.variant, str(u)) == (4, uuid.RFC_4122, a)
