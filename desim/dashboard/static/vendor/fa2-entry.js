// Entry point of the vendored ForceAtlas2 bundle: exposes graphology-layout-forceatlas2 as window.ForceAtlas2.
var forceAtlas2 = require('graphology-layout-forceatlas2');
var FA2Layout = require('graphology-layout-forceatlas2/worker');
module.exports = {assign: forceAtlas2.assign, inferSettings: forceAtlas2.inferSettings, run: forceAtlas2, FA2Layout: FA2Layout};
