"""The report's intervention marks: only scheduled events and broadcasts, and in a comparison whose each one is."""
from __future__ import annotations

from desim.report.data import RunData, marked_events


def run(run_id, events):
    return RunData(run={"run_id": run_id}, config={}, metrics={}, n_edges=0, llm=None,
                   events=[{"step": s, "kind": k, "name": n, "detail": None} for s, k, n in events])


def test_rows_a_study_records_itself_are_not_marked_as_interventions():
    news = [(s, "news", "headline") for s in range(1, 6)]       # a row every step, as advance_to may add
    treat = run("t", news + [(3, "event", "lockdown"), (4, "broadcast", "advice")])
    assert treat.event_steps() == {3: ["lockdown"], 4: ["advice"]}
    assert marked_events(treat) == {3: ["lockdown"], 4: ["advice"]}


def test_each_arms_own_interventions_say_whose_they_are():
    treat = run("t", [(2, "event", "campaign"), (6, "event", "lockdown")])
    control = run("c", [(2, "event", "campaign"), (4, "event", "lockdown"), (5, "news", "headline")])
    assert marked_events(treat, control) == {2: ["campaign"], 4: ["lockdown (control only)"],
                                             6: ["lockdown (treatment only)"]}


def test_a_label_at_the_last_step_is_drawn_inside_the_picture():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from desim.report import figures
    fig, ax = plt.subplots(figsize=(8, 3))
    ax.plot(range(11), range(11))
    ax.set_xlim(0, 10)
    labels = [(1, "campaign_starts", "tab:orange"), (10, "control: clinic_expansion", "0.4"),
              (6, "fork at step 6", "tab:red")]
    assert figures.draw_labels(ax, labels) >= 1
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    texts = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts}
    assert set(texts) == {text for _, text, _ in labels}
    for text, box in texts.items():
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, f"'{text}' runs out of the picture"
    # the first one still starts right of its step, the last one ends left of its own
    step_px = {s: ax.transData.transform((s, 0))[0] for s, _, _ in labels}
    assert texts["campaign_starts"].x0 > step_px[1]
    assert texts["control: clinic_expansion"].x1 < step_px[10]
    plt.close(fig)
