"""Keyset pages in the store, on SQLite and PostgreSQL: both orders, ``after`` and
``before`` as Letta defines them, filters in the query, a cursor naming no row ignored."""

from __future__ import annotations

from stateloop.messages import assistant, user
from stateloop.store import (
    AgentRecord,
    BlockRecord,
    IdentityRecord,
    Page,
    StepRecord,
    open_store,
)
from stateloop.store.records import EVERYTHING

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


async def test_pages_of_steps_in_both_places_a_step_is_kept(db_url: str) -> None:
    async with await open_store(db_url) as store:
        agents = [AgentRecord(name=f"stepper-{n}") for n in range(2)]
        for record in agents:
            await store.create_agent(record)
        run = await store.create_run(agents[0].id)
        other = await store.create_run(agents[1].id)
        steps = []
        for n in range(12):  # pairs share a time: ids decide; odd ones wrote no message
            owner = agents[n % 3 == 0].id
            step = StepRecord(run.id if owner == agents[0].id else other.id, index=n,
                              model="openai/gpt-4o-mini" if n < 6 else "anthropic/claude",
                              created_at=T0 + n // 2,
                              metadata={"trace_id": "a1" * 16} if n < 2 else {})
            said = [] if n % 2 else [user(f"step {n}"), assistant(f"answer {n}")]
            await store.append_step(owner, said, step=step, run_id=step.run_id)
            steps.append(step)
        steps.sort(key=lambda step: (step.created_at, step.id))
        ids = [step.id for step in steps]

        async def step_ids(page: Page = EVERYTHING, **options: object) -> list[str]:
            found = await store.page_steps(page, **options)  # type: ignore[arg-type]
            return [step.id for step in found]

        assert await step_ids() == ids
        assert await step_ids(Page(limit=5)) == ids[:5]
        assert await step_ids(Page(order="desc", limit=5)) == ids[::-1][:5]
        assert await step_ids(Page(after=ids[3], limit=4)) == ids[4:8]
        assert await step_ids(Page(after=ids[8], order="desc")) == ids[7::-1]
        assert await step_ids(Page(after=ids[2], before=ids[6])) == ids[3:6]
        assert await step_ids(Page(after=ids[6], before=ids[2], order="desc")) == ids[5:2:-1]
        assert await step_ids(Page(after="step-none", limit=2)) == ids[:2]
        first = [step.id for step in steps if step.agent_id == agents[1].id]
        assert first and await step_ids(agent_id=agents[1].id) == first
        assert await step_ids(Page(order="desc", after=first[-1]), agent_id=agents[1].id) == \
            first[-2::-1]
        assert await step_ids(model="claude") == [s.id for s in steps if s.index >= 6]
        assert await step_ids(model="openai/gpt-4o-mini") == [s.id for s in steps
                                                              if s.index < 6]
        assert await step_ids(model="gpt") == []
        assert await step_ids(start=T0 + 2, end=T0 + 3) == ids[4:8]
        traced = [s.id for s in steps if s.index < 2]  # one carried, one kept apart
        assert await step_ids(trace_ids=["a1" * 16, "b2" * 16]) == traced
        assert await step_ids(trace_ids=["b2" * 16]) == await step_ids(trace_ids=[]) == []

        carried, separate = (next(s for s in steps if s.index % 2 == odd) for odd in (0, 1))
        await store.set_step_feedback(carried.id, "positive", ["slow"])
        await store.set_step_feedback(separate.id, "negative", ["wrong", "slow"])
        assert await step_ids(feedback="positive") == [carried.id]
        assert await step_ids(feedback="negative") == [separate.id]
        assert set(await step_ids(has_feedback=True)) == {carried.id, separate.id}
        assert len(await step_ids(has_feedback=False)) == 10
        assert set(await step_ids(tags=["slow"])) == {carried.id, separate.id}
        assert await step_ids(tags=["wrong", "other"]) == [separate.id]
        assert await step_ids(tags=["other"]) == []
        await store.set_step_feedback(carried.id, None)
        assert await step_ids(has_feedback=True) == [separate.id]
        got = await store.page_steps(Page(after=ids[0], limit=1))
        assert got[0].id == ids[1] and got[0].created_at == steps[1].created_at
