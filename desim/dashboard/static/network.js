/* desim dashboard network views: the report's renderer (desim/report/netview.py, served as
 * /static/netview.js) over the dashboard's API.
 *
 * The server sends one view at a time (GET /api/studies/<id>/network?run=&state=&view=): the
 * positions come from the network's layout, computed once in Python and stored beside the study's
 * runs (runs/layouts/), never in the page. The first answer is the view that reads at the run's
 * size (every agent up to 20,000, one disc per community above); the other views are fetched when
 * their button is first pressed. Counts are always over all agents.
 */
"use strict";

/* The drawn views with their controls; onDispose receives the clean-up for navigation. */
function networkView(sid, net, {url, onDispose}) {
  const stage = h("div", {id: "net-view", "data-nodes": net.meta.n_agents, "data-links": net.meta.n_links});
  const api = DesimNet.mount(stage, net, {
    view: net.view,
    loadView: async view => {
      const part = await getJSON(url(`&view=${enc(view)}`));
      if (part.busy) throw new Error(part.message);
      return part;
    },
    onNodeClick: id => { location.hash = `#/study/${enc(sid)}/agent/${enc(net.run.run_id)}/${enc(id)}`; },
  });
  onDispose(() => api.dispose());
  return h("div", {class: "net-view"},
    h("p", {class: "muted", id: "net-what"},
      `${net.meta.n_agents.toLocaleString("en")} agents, ${net.meta.n_links.toLocaleString("en")} links; ` +
      "wheel to zoom, drag to pan, double-click to reset, click an agent to open it."),
    stage);
}
