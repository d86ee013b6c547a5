"""contrib/: the Prometheus alerting rules and the Grafana dashboard.

The rules pass `promtool check rules` (Debian's prometheus package) and
their unit tests (`promtool test rules`, contrib/prometheus/
fscrub.rules.test.yml); the dashboard parses and fits the subset of
Grafana's dashboard model it uses (a JSON schema below); and every fscrub_*
metric either names is one that fscrub really writes: a real scrub of a
tmpfs with --metrics and --state-dir (so that the metrics from the run
history are there too), and `fscrub watch --metrics` on an ext4 image,
give the names.  A rule with a misspelt metric
would otherwise pass promtool and never fire.
"""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import FSCRUB, TOP, check_sanitizers, need_root, need_tools
import fsimage

RULES = os.path.join(TOP, "contrib", "prometheus", "fscrub.rules.yml")
RULES_TEST = os.path.join(TOP, "contrib", "prometheus", "fscrub.rules.test.yml")
DASHBOARD = os.path.join(TOP, "contrib", "grafana", "fscrub.json")

METRIC = re.compile(r"\bfscrub_[a-z0-9_]+\b")

# What the dashboard is made of: Grafana's dashboard JSON (schemaVersion
# 39), the fields it needs to import and draw, with their types.
TARGET = {"type": "object", "required": ["refId", "expr"],
          "properties": {"refId": {"type": "string"}, "expr": {"type": "string", "minLength": 1},
                         "legendFormat": {"type": "string"}}}
PANEL = {"type": "object", "required": ["id", "type", "title", "gridPos", "targets", "datasource"],
         "properties": {
             "id": {"type": "integer"},
             "type": {"enum": ["stat", "table", "timeseries", "gauge", "bargauge"]},
             "title": {"type": "string", "minLength": 1},
             "gridPos": {"type": "object", "required": ["x", "y", "w", "h"],
                         "properties": {k: {"type": "integer", "minimum": 0}
                                        for k in ("x", "y", "w", "h")}},
             "datasource": {"type": "object", "required": ["type", "uid"]},
             "targets": {"type": "array", "minItems": 1, "items": TARGET},
             "fieldConfig": {"type": "object", "required": ["defaults", "overrides"]}}}
SCHEMA = {
    "type": "object",
    "required": ["title", "uid", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "title": {"type": "string", "minLength": 1},
        "uid": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,40}$"},
        "schemaVersion": {"type": "integer", "minimum": 30},
        "panels": {"type": "array", "minItems": 1, "items": PANEL},
        "templating": {"type": "object", "required": ["list"],
                       "properties": {"list": {"type": "array", "items": {
                           "type": "object", "required": ["name", "type"]}}}},
        "time": {"type": "object", "required": ["from", "to"]},
    },
}


def produced_metrics(workdir):
    """The metric names of a real fscrub --metrics file, the run history's included."""
    need_root()
    state = os.path.join(workdir, "state")
    os.mkdir(state)
    fs = fsimage.make_tmpfs(workdir, name="contrib", size_mb=8, populate=False)
    try:
        prom = os.path.join(workdir, "m.prom")
        p = subprocess.run([FSCRUB, "--state-dir", state, "--metrics", prom, fs.mnt],
                           capture_output=True, text=True)
        check_sanitizers(p.stderr)
        assert p.returncode == 0, p
        with open(prom) as f:
            text = f.read()
    finally:
        fs.cleanup()
    text += watch_metrics(workdir)
    names = set(re.findall(r"^(fscrub_[a-z0-9_]+)[{ ]", text, re.M))
    # every sample has its HELP and TYPE
    assert names == set(re.findall(r"^# TYPE (fscrub_[a-z0-9_]+) (?:gauge|counter)$", text,
                                   re.M)), text
    return names


def watch_metrics(workdir):
    """What fscrub watch --metrics writes (at start) for an ext4."""
    need_tools("mkfs.ext4")
    img = fsimage.Image(workdir, "ext4", size_mb=32)
    prom = os.path.join(workdir, "watch.prom")
    try:
        img.mkfs()
        img.mount()
        proc = subprocess.Popen([FSCRUB, "watch", "--on-error", "true", "--state-dir",
                                 os.path.join(workdir, "state"), "--metrics", prom, img.mnt],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 10
            while not os.path.exists(prom) and time.monotonic() < deadline \
                    and proc.poll() is None:
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        check_sanitizers(err)
        assert proc.returncode == 0, err
        with open(prom) as f:
            return f.read()
    finally:
        img.cleanup(remove=True)


def referenced(text):
    return set(METRIC.findall(text))


def rule_exprs(text):
    """The expr: lines of a rules file (the only place a metric counts;
    the annotations may name anything)."""
    return "\n".join(re.findall(r"^\s*expr:\s*(.*)$", text, re.M))


def dashboard_exprs(dash):
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    for v in dash["templating"]["list"]:
        q = v.get("query")
        exprs.append(q.get("query", "") if isinstance(q, dict) else q or "")
    return "\n".join(exprs)


def missing(produced, rules_text, dash):
    """{metric: where} for every metric referenced and not produced."""
    out = {}
    for name in referenced(rule_exprs(rules_text)) - produced:
        out[name] = "rules"
    for name in referenced(dashboard_exprs(dash)) - produced:
        out[name] = "dashboard"
    return out


@pytest.fixture(scope="module")
def produced(tmp_path_factory):
    return produced_metrics(str(tmp_path_factory.mktemp("contrib")))


def test_promtool_check_and_test_rules():
    need_tools("promtool")
    p = subprocess.run(["promtool", "check", "rules", RULES], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: 9 rules found" in p.stdout, p.stdout
    p = subprocess.run(["promtool", "test", "rules", os.path.basename(RULES_TEST)],
                       capture_output=True, text=True, cwd=os.path.dirname(RULES_TEST))
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr


def test_dashboard_json_schema():
    import jsonschema        # Debian's python3-jsonschema (tools/packages)
    with open(DASHBOARD) as f:
        dash = json.load(f)
    jsonschema.validate(dash, SCHEMA)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), ids
    for p in dash["panels"]:
        assert [t["refId"] for t in p["targets"]] == \
            [chr(65 + i) for i in range(len(p["targets"]))], p["title"]
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, p["title"]
    # a broken one is refused
    bad = json.loads(json.dumps(dash))
    del bad["panels"][0]["targets"][0]["expr"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA)


def test_every_metric_referenced_exists(produced):
    with open(RULES) as f:
        rules_text = f.read()
    with open(DASHBOARD) as f:
        dash = json.load(f)
    rules_names = referenced(rule_exprs(rules_text))
    dash_names = referenced(dashboard_exprs(dash))
    # the alerts the issue asks for, on the metrics that carry them
    assert {"fscrub_last_success_timestamp_seconds", "fscrub_open_findings",
            "fscrub_open_media_errors", "fscrub_watch_events",
            "fscrub_watch_events_total"} <= rules_names, rules_names
    assert missing(produced, rules_text, dash) == {}
    # and each is documented (fscrub(8), METRICS)
    with open(os.path.join(TOP, "man", "fscrub.8")) as f:
        man = f.read().replace("\\", "")
    assert [n for n in sorted(produced) if n not in man] == []
    print("metrics: %d produced, %d in rules, %d in the dashboard" % (
        len(produced), len(rules_names), len(dash_names)))


def test_a_misspelt_metric_is_caught(produced):
    """The check above fails for a rule or a panel whose metric does not exist."""
    with open(RULES) as f:
        rules_text = f.read()
    with open(DASHBOARD) as f:
        dash = json.load(f)
    broken = rules_text.replace("fscrub_open_media_errors > 0", "fscrub_media_errors > 0")
    assert broken != rules_text
    assert missing(produced, broken, dash) == {"fscrub_media_errors": "rules"}
    bad = json.loads(json.dumps(dash))
    bad["panels"][-1]["targets"][0]["expr"] = "fscrub_last_run_end_time{}"
    assert missing(produced, rules_text, bad) == {"fscrub_last_run_end_time": "dashboard"}
