"""Keyset pages in the store, on SQLite and PostgreSQL: both orders, ``after`` and
``before`` as Letta defines them, filters in the query, a cursor naming no row ignored."""

from __future__ import annotations

from stateloop.store import AgentRecord, BlockRecord, IdentityRecord, Page, open_store

T0 = 1_700_000_000.0


async def test_pages_of_agents_runs_and_blocks(db_url: str) -> None:
    async with await open_store(db_url) as store:
        agents = []
        for n in range(12):
            record = AgentRecord(name=f"pager-{n}", tags=[f"mod{n % 2}"],
                                 created_at=T0 + n // 2)  # pairs share a time: ids decide
            await store.create_agent(record, [BlockRecord(label=f"b{n % 3}",
                                                          created_at=T0 + n)])
            agents.append(record)
        agents.sort(key=lambda r: (r.created_at, r.id))
        ids = [r.id for r in agents]

        async def agent_ids(**options: object) -> list[str]:
            return [r.id for r in await store.list_agents(**options)]  # type: ignore[arg-type]

        assert await agent_ids() == ids
        assert await agent_ids(page=Page(limit=5)) == ids[:5]
        assert await agent_ids(page=Page(order="desc", limit=5)) == ids[::-1][:5]
        assert await agent_ids(page=Page(after=ids[3], limit=4)) == ids[4:8]
        assert await agent_ids(page=Page(after=ids[8], order="desc")) == ids[7::-1]
        assert await agent_ids(page=Page(after=ids[2], before=ids[6])) == ids[3:6]
        assert await agent_ids(page=Page(after=ids[6], before=ids[2], order="desc")) == \
            ids[5:2:-1]
        assert await agent_ids(page=Page(after="agent-none", limit=2)) == ids[:2]
        odd = [r.id for r in agents if "mod1" in r.tags]
        assert await agent_ids(tags=["mod1"], page=Page(after=odd[1], limit=2)) == odd[2:4]
        assert await agent_ids(query_text="PAGER-1", page=Page(order="desc")) == [
            r.id for r in reversed(agents) if r.name.startswith("pager-1")]

        identity = await store.create_identity(IdentityRecord(
            identifier_key="user-1", name="User", identity_type="user"))
        await store.set_agent_identities(ids[4], [identity.id])
        await store.set_agent_identities(ids[9], [identity.id])
        assert await agent_ids(identifier_keys=["user-1"], page=Page(order="desc")) == \
            [ids[9], ids[4]]
        assert await store.count_agents(identity_id=identity.id, tags=["mod0", "mod1"]) == 2
        assert await store.count_agents(tags=["mod0"]) == 6

        runs = [await store.create_run(ids[n % 3]) for n in range(9)]
        mine = [run.id for run in runs if run.agent_id in (ids[0], ids[1])]
        order = sorted(runs, key=lambda run: (run.created_at, run.id))
        chosen = [r.id for r in order if r.id in mine]
        page = await store.page_runs(Page(order="desc", after=chosen[-1], limit=3),
                                     agent_ids=[ids[0], ids[1]], statuses=["created"])
        assert [run.id for run in page] == chosen[-2::-1][:3]
        assert await store.page_runs(Page(), statuses=["running"]) == []

        blocks = await store.list_blocks(label="b1", page=Page(order="desc", limit=2))
        assert [block.created_at for block in blocks] == [T0 + 10, T0 + 7]
        shared = await store.agents_blocks([ids[0], ids[5]])
        assert set(shared) == {ids[0], ids[5]} and all(len(v) == 1 for v in shared.values())
