"""Malformed values from study code are refused where they enter desim, naming the step (and round), the
agent or author where known, and the field: an action's rationale, payload and state keys that are not text
or that differ only by case, ``post_batch`` lists of different lengths or of values that are not text,
``ActionColumns`` of the wrong shape, ``ColumnarFeed.post`` arguments, and drained messages a bus of the
study's own made. Each used to end in a bare Arrow or Python error naming none of these."""
from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import desim
from desim import (Action, ActionColumns, DecisionModel, EnvironmentProvider, InMemoryMessageBus, MessageBus,
                   MetricCollector, Observation)
from desim.errors import FieldError
from desim.messaging.columnar import ColumnarFeed
from desim.records import Message
from desim.run.checks import RunError, checked_action_columns, checked_actions
from desim.store.fields import Fields
from desim.store.tables import message_rows

THIS = Path(__file__)


def line_of(marker: str) -> int:
    """The line of this file that carries ``# <marker>``."""
    return next(i for i, text in enumerate(THIS.read_text().splitlines(), 1) if text.rstrip().endswith(f"# {marker}"))


# --- a small study on each path, misbehaving on request at step 2 -------------------------------------
class Line(EnvironmentProvider):
    def __init__(self, bad: str = ""):
        self.bad = bad

    def reset(self, seed):
        self.x = {a: float(i) for i, a in enumerate(self.ctx.agent_ids)}
        self.bus = InMemoryMessageBus()

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx, local_physical={"x": self.x[a]}) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] = a.payload["support"]
        t, r, ids = self.ctx.step, self.ctx.round_idx, list(self.ctx.agent_ids)
        if t != 2:
            return
        if self.bad == "lengths":
            self.bus.post_batch(t, r, ids[:2], [1])  # post:lengths
        elif self.bad == "author":
            self.bus.post_batch(t, r, [7], [1])  # post:author
        elif self.bad == "kinds":
            self.bus.post_batch(t, r, ids[:1], [1], kinds=5)  # post:kinds
        elif self.bad == "audiences":
            self.bus.post_batch(t, r, ids[:1], [1], audiences=5)  # post:audiences

    def agent_state(self, agent_id):
        state = {"support": self.x[agent_id]}
        if self.bad == "state_key" and self.ctx.step == 2:
            state[3] = 1
        if self.bad == "state_case":
            state["Support"] = 1.0
        return state

    def drain_messages(self):
        return self.bus.drain_columns()


class Decide(DecisionModel):
    def __init__(self, bad: str = ""):
        self.bad = bad

    def decide_batch(self, observations, memories):
        out = []
        for o in observations:
            payload, extra = {"support": o.local_physical["x"] + 0.5}, {}
            if o.step == 2 and self.bad == "rationale":
                extra["rationale"] = 7
            if o.step == 2 and self.bad == "payload_key":
                payload[1] = 2
            if o.step == 2 and self.bad == "payload_case":
                payload["Support"] = 1.0
            out.append(Action(agent_id=o.agent_id, step=o.step, kind="move", payload=payload, **extra))
        return out


class Grid(EnvironmentProvider):
    def __init__(self, bad: str = ""):
        self.bad = bad

    def reset(self, seed):
        self.x = np.arange(len(self.ctx.agent_ids), dtype=float)

    def observe_columns(self, idx, t, round_idx):
        return {"x": self.x[idx]}

    def apply_columns(self, idx, actions):
        self.x[idx] = actions.payload["support"]

    def state_columns(self):
        columns = {"support": self.x}
        if self.bad == "state_case":
            columns["SUPPORT"] = self.x
        return columns


class DecideColumns(DecisionModel):
    def __init__(self, bad: str = ""):
        self.bad = bad

    def decide_columns(self, obs, idx, t, round_idx):
        n, payload, kind = len(idx), {"support": obs["x"] + 0.5}, "move"
        if t == 2 and self.bad == "kind":
            kind = 5
        if t == 2 and self.bad == "kinds":
            kind = np.array(["move"] * (n - 1) + [7], dtype=object)
        if t == 2 and self.bad == "payload_case":
            payload["Support"] = np.zeros(n)
        return ActionColumns(kind=kind, payload=payload, acted=np.ones(n, bool))


class Total(MetricCollector):
    def collect(self, t, environment, actions):
        values = environment.x.values() if isinstance(environment.x, dict) else environment.x
        return {"total": float(sum(values))}


class Refused:
    """A value of step 0, the study's input: refused before the run is recorded (no run, no store)."""

    def __init__(self, error: str):
        self.error = error


def failure(tmp_path, environment, decision) -> desim.RunFailed | Refused:
    study = desim.Study(environment=environment, decision=decision, collector=Total, population=4, steps=3, seed=1,
                        folder=tmp_path / "s")
    with pytest.raises((desim.RunFailed, FieldError)) as err:
        desim.run_study(study)
    if isinstance(err.value, FieldError):
        assert not (tmp_path / "s" / "runs" / "desim.duckdb").exists()      # nothing of the run was recorded
        return Refused(f"FieldError: {err.value}")
    return err.value


PER_AGENT = [
    ("rationale", "decision", "RunError: step 2 round 0: action for agent 'a0': rationale is int 7; it must be text "
                              "(why the agent acted) or None"),
    ("payload_key", "decision", "FieldError: step 2: agent 'a0': payload key 1 is not a non-empty string"),
    ("payload_case", "decision", "FieldError: step 2: agent 'a0': payload fields 'support' and 'Support' differ only "
                                 "by case (SQL ignores the case of names: payload.Support would read payload.support); "
                                 "rename one"),
    ("state_key", "environment", "FieldError: step 2: agent 'a0': state key 3 is not a non-empty string"),
    ("state_case", "environment", "FieldError: step 0: agent 'a0': state fields 'support' and 'Support' differ only "
                                  "by case (SQL ignores the case of names: state.Support would read state.support); "
                                  "rename one"),
]


@pytest.mark.parametrize("bad, who, error", PER_AGENT, ids=[c[0] for c in PER_AGENT])
def test_per_agent_values_are_refused_naming_step_agent_and_field(tmp_path, bad, who, error):
    failed = failure(tmp_path, Line(bad if who == "environment" else ""), Decide(bad if who == "decision" else ""))
    assert failed.error == error


POSTS = [
    ("lengths", "ValueError: post_batch: 2 authors but 1 contents (one content per author, in the same order)"),
    ("author", "TypeError: post_batch: authors[0] is 7 (int), not text (an agent id)"),
    ("kinds", "TypeError: post_batch: kinds is int 5; give one text for every post, or a list of one per author"),
    ("audiences", "TypeError: post_batch: audiences is int 5; give one text for every post, or a list of one per "
                  "author"),
]


@pytest.mark.parametrize("bad, error", POSTS, ids=[c[0] for c in POSTS])
def test_a_malformed_post_batch_fails_at_the_line_that_posted_it(tmp_path, bad, error):
    failed = failure(tmp_path, Line(bad), Decide())
    where = re.escape(f"{THIS.name}:{line_of(f'post:{bad}')}")
    assert re.fullmatch(rf"step 2 round 0: Line\.apply failed at \S*{where}: {re.escape(error)}", failed.error), \
        failed.error


COLUMNAR = [
    ("kind", "decision", "RunError: step 2 round 0: decide_columns' ActionColumns: kind is int 5; it must be one "
                         "non-empty string for everyone or an array of 4 strings, one per participant"),
    ("kinds", "decision", "FieldError: step 2: agent 'a3': action kind 7 (int) is not text; ActionColumns' kind is "
                          "one string for everyone or one string per participant"),
    ("payload_case", "decision", "FieldError: step 2: payload fields 'support' and 'Support' differ only by case "
                                 "(SQL ignores the case of names: payload.Support would read payload.support); "
                                 "rename one"),
    ("state_case", "environment", "FieldError: step 0: state fields 'support' and 'SUPPORT' differ only by case (SQL "
                                  "ignores the case of names: state.SUPPORT would read state.support); rename one"),
]


@pytest.mark.parametrize("bad, who, error", COLUMNAR, ids=[c[0] for c in COLUMNAR])
def test_columnar_values_are_refused_naming_step_and_field(tmp_path, bad, who, error):
    failed = failure(tmp_path, Grid(bad if who == "environment" else ""),
                     DecideColumns(bad if who == "decision" else ""))
    assert failed.error == error


def test_the_steps_before_a_refused_value_are_kept(tmp_path):
    failed = failure(tmp_path, Line(), Decide("payload_case"))
    with duckdb.connect(str(failed.db_path), read_only=True) as con:
        assert con.execute("SELECT status, last_step FROM runs").fetchall() == [("failed", 1)]


# --- the checks one by one ---------------------------------------------------------------------------
IDS = ["a", "b", "c"]


def test_a_rationale_is_text_or_none_and_anything_else_names_the_agent():
    good = [Action("a", 2, "move", rationale="why"), Action("b", 2, "move", rationale=None),
            Action("c", 2, "move", rationale=np.str_("numpy text"))]
    assert checked_actions(good, IDS, 2, 1, {a: i for i, a in enumerate(IDS)}) is good
    for bad, shown in ((7, "int 7"), (["x"], "list ['x']"), (b"raw", "bytes b'raw'")):
        actions = [Action("a", 2, "move"), Action("b", 2, "move", rationale=bad)]
        with pytest.raises(RunError, match=re.escape(f"step 2 round 1: action for agent 'b': rationale is {shown}; "
                                                     "it must be text")):
            checked_actions(actions, IDS, 2, 1, {a: i for i, a in enumerate(IDS)})


def test_action_columns_of_good_shapes_pass():
    for kind in ("move", np.array(["move", "stay", "move"]), np.array(["move", None, 5], dtype=object),
                 ["move", "stay", "move"]):
        acts = ActionColumns(kind=kind, payload={"to": np.arange(3)}, acted=np.ones(3, bool))
        assert checked_action_columns(acts, 3, 2, 0) is acts          # entries are checked as they are stored
    acts = ActionColumns(kind="move", payload={"to": [1, 2, 3]}, source="llm")
    assert checked_action_columns(acts, 3, 2, 0) is acts


@pytest.mark.parametrize("acts, message", [
    (ActionColumns(kind=5, payload={"to": np.arange(3)}),
     "kind is int 5; it must be one non-empty string for everyone or an array of 3 strings, one per participant"),
    (ActionColumns(kind="", payload={"to": np.arange(3)}), "kind is ''; it must be a non-empty string"),
    (ActionColumns(kind=np.array([["move"] * 3]), payload={"to": np.arange(3)}), "kind is ndarray"),
    (ActionColumns(kind=["move", "stay"], payload={"to": np.arange(3)}),
     "kind has 2 entries for 3 participants (one per participant, in the order of idx)"),
    (ActionColumns(kind="move", payload=[1, 2, 3]), "payload is list [1, 2, 3]; it must be a dict"),
    (ActionColumns(kind="move", payload={1: np.arange(3)}), "payload key 1 is not a non-empty string"),
    (ActionColumns(kind="move", payload={"to": 5}), "payload field 'to' is 5, not one value per participant"),
    (ActionColumns(kind="move", payload={"to": np.arange(3), "by": np.arange(2)}),
     "payload field 'by' has 2 entries for 3 participants"),
    (ActionColumns(kind="move", payload={"to": np.arange(3)}, acted=np.ones(2, bool)),
     "acted has 2 entries for 3 participants"),
    (ActionColumns(kind="move", payload={"to": np.arange(3)}, source=5), "source is 5; it must be one of rule, llm"),
    (ActionColumns(kind="move", payload={"to": np.arange(3)}, source="oracle"), "source is 'oracle'; it must be one"),
])
def test_action_columns_of_a_wrong_shape_are_refused_naming_the_step_round_and_column(acts, message):
    with pytest.raises(RunError, match=re.escape(f"step 4 round 1: decide_columns' ActionColumns: {message}")):
        checked_action_columns(acts, 3, 4, 1)


def test_the_old_answer_count_error_is_kept():
    with pytest.raises(RunError, match="step 4 round 1: decide_columns must return ActionColumns with 4 entries, "
                                       "got ActionColumns of 3"):
        checked_action_columns(ActionColumns(kind="move", payload={"to": np.arange(3)}), 4, 4, 1)


def test_payload_keys_that_are_not_text_are_named_without_sorting_them():
    fields = Fields("payload", fixed=False)
    with pytest.raises(FieldError, match=r"^step 3: agent 'b': payload key 1 is not a non-empty string$"):
        fields.struct([{"support": 0.5}, {"support": 0.5, 1: 2}], ["a", "b"], 3)


def test_a_payload_field_may_not_differ_only_by_case_from_one_of_an_earlier_step():
    fields = Fields("payload", fixed=False)
    fields.struct([{"to": 1}], ["a"], 1)
    fields.struct([{"To_x": 1}], ["a"], 2)          # a new field, not a case variant: fine
    with pytest.raises(FieldError, match=r"^step 3: agent 'b': payload fields 'to' and 'TO' differ only by case"):
        fields.struct([None, {"TO": 1}], ["a", "b"], 3)


def test_only_ascii_letters_fold_as_duckdb_folds_them():
    """DuckDB tells 'Ä' from 'ä' (it folds ASCII letters only), so both are kept, and read back apart."""
    fields = Fields("state", fixed=True)
    fields.start(["Ä", "ä"], 0, "a")
    column = fields.struct([{"Ä": 1.0, "ä": 2.0}], ["a"], 0)
    with duckdb.connect() as con:
        con.register("panel", pa.table({"state": column}))
        assert con.execute('SELECT state."Ä", state."ä" FROM panel').fetchall() == [(1.0, 2.0)]


def test_a_state_key_that_is_not_text_is_named_among_text_ones():
    fields = Fields("state", fixed=True)
    fields.start(["support"], 0, "a")
    with pytest.raises(FieldError, match=r"^step 2: agent 'b': state key 3 is not a non-empty string$"):
        fields.struct([{"support": 0.5}, {"support": 0.5, 3: 1, "extra": 2}], ["a", "b"], 2)


# --- post_batch on either bus -----------------------------------------------------------------------
class OwnBus(MessageBus):
    """A bus of a study's own: ``post_batch`` is the protocol's default, built on ``post``."""

    def __init__(self):
        self.posted = []

    def post(self, message):
        self.posted.append(message)

    def drain(self):
        posted, self.posted = self.posted, []
        return posted


@pytest.mark.parametrize("bus", [InMemoryMessageBus, OwnBus])
@pytest.mark.parametrize("args, extra, error, message", [
    ((["n001", "n002"], [1]), {}, ValueError, "post_batch: 2 authors but 1 contents"),
    (([7], [1]), {}, TypeError, "post_batch: authors[0] is 7 (int), not text (an agent id)"),
    (("n001", [1]), {}, TypeError, "post_batch: authors is str 'n001'; give a list, one author per post"),
    ((["n001"], {"x": 1}), {}, TypeError, "post_batch: contents is dict {'x': 1}; give a list (or an array), one content per post"),
    ((["n001"], [1]), {"kinds": 5}, TypeError, "post_batch: kinds is int 5; give one text for every post"),
    ((["n001"], [1]), {"kinds": ("post",)}, TypeError, "post_batch: kinds is tuple ('post',); give one text"),
    ((["n001"], [1]), {"audiences": 5}, TypeError, "post_batch: audiences is int 5; give one text"),
    ((["n001"], [1]), {"reply_to": 5}, TypeError, "post_batch: reply_to is int 5; give one text for every post "
                                                  "(or None), or a list"),
    ((["n001", "n002"], [1, 2]), {"channels": ["feed"]}, ValueError,
     "post_batch: channels has 1 entries for 2 authors (one per author, or one value for all)"),
    ((["n001", "n002"], [1, 2]), {"channels": ["feed", 3]}, TypeError,
     "post_batch: channels[1] (the post by 'n002') is 3 (int), not text"),
    ((["n001", "n002"], [1, 2]), {"reply_to": [None, 4]}, TypeError,
     "post_batch: reply_to[1] (the post by 'n002') is 4 (int), not text"),
])
def test_a_malformed_post_batch_is_refused_before_anything_is_posted(bus, args, extra, error, message):
    b = bus()
    with pytest.raises(error, match="^" + re.escape(message)):
        b.post_batch(2, 0, *args, **extra)
    assert b.drain() == []


@pytest.mark.parametrize("bus", [InMemoryMessageBus, OwnBus])
def test_good_post_batches_still_post(bus):
    b = bus()
    b.post_batch(2, 0, [np.str_("n001"), "n002"], [{"x": 1}, {"x": 2}], kinds=["post", "reply"],
                 reply_to=[None, "n001"])
    b.post_batch(2, 1, ("n003",), ({"x": 3},), channels="news")
    rows = message_rows(b.drain_columns(), 2).to_pydict()
    assert rows["author_id"] == ["n001", "n002", "n003"] and rows["kind"] == ["post", "reply", "post"]
    assert rows["reply_to"] == [None, "n001", None] and rows["channel"] == ["feed", "feed", "news"]


def test_messages_a_bus_of_the_study_made_are_refused_naming_the_message():
    bus = OwnBus()
    bus.post(Message(author_id="n001", step=2, round=0, content={"x": 1}))
    bus.post(Message(author_id=7, step=2, round=1, content={"x": 1}))
    with pytest.raises(FieldError, match=r"^step 2 round 1: message by 7: author_id 7 \(int\) is not text$"):
        message_rows(bus.drain_columns(), 2)
    bus.post(Message(author_id="n001", step=2, round=0, content={"x": 1}, channel=5))
    with pytest.raises(FieldError, match=r"^step 2 round 0: message by 'n001': channel 5 \(int\) is not text$"):
        message_rows(bus.drain(), 2)
    columns = {"author_id": ["n001", "n002"], "step": [2, 2], "round": [0, 0], "content": [1], "channel": ["feed"] * 2,
               "kind": ["post"] * 2, "audience": ["neighbors"] * 2, "reply_to": [None] * 2}
    with pytest.raises(FieldError, match=r"^drained messages: columns of different lengths \(author_id 2, step 2, "
                                         r"round 2, content 1, "):
        message_rows(columns, 2)


# --- ColumnarFeed.post -------------------------------------------------------------------------------
@pytest.mark.parametrize("args, extra, error, message", [
    (([0, 1], {"x": np.zeros(2)}), {"channel": 5}, TypeError, "ColumnarFeed.post: channel is int 5, not text"),
    (([0, 3], {"x": np.zeros(2)}), {}, ValueError, "ColumnarFeed.post: author 3 is not the position of an agent "
                                                    "(0 to 2)"),
    (([-1], {"x": np.zeros(1)}), {}, ValueError, "ColumnarFeed.post: author -1 is not the position of an agent"),
    ((["a"], {"x": np.zeros(1)}), {}, TypeError, "ColumnarFeed.post: authors ['a'] are not agent positions"),
    (([0], {1: np.zeros(1)}), {}, TypeError, "ColumnarFeed.post: column name 1 is not a non-empty string"),
    (([0, 1], {"x": np.zeros(1)}), {}, ValueError, "ColumnarFeed.post: column 'x' has 1 values for 2 authors"),
    (([0, 1], {"x": 0.5}), {}, ValueError, "ColumnarFeed.post: column 'x' has one value for 2 authors"),
])
def test_a_malformed_columnar_post_is_refused(args, extra, error, message):
    feed = ColumnarFeed(np.array([0, 1, 2, 3]), np.array([1, 2, 0]), ["a", "b", "c"])
    with pytest.raises(error, match="^" + re.escape(message)):
        feed.post(args[0], 2, 0, args[1], **extra)
    assert feed.drain().num_rows == 0


def test_post_batch_takes_contents_as_any_sequence_of_one_per_author():
    """An array of opinions, a range: contents were zipped with the authors before the checks, so they stay
    accepted; a text or a dict is no sequence of contents."""
    import numpy as np
    from desim.store.tables import message_rows
    bus = InMemoryMessageBus()
    bus.post_batch(1, 0, ["a", "b"], np.array([0.25, 0.5]))
    bus.post_batch(1, 0, ["a", "b"], range(2))
    assert message_rows(bus.drain(), 1).column("content").to_pylist() == ["0.25", "0.5", "0", "1"]
    for wrong in ("xy", {"a": 1}):
        with pytest.raises(TypeError, match="post_batch: contents is"):
            bus.post_batch(1, 0, ["a", "b"], wrong)
