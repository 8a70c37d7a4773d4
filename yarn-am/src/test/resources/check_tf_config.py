"""Every task leaves its TF_CONFIG in a shared directory; the chief waits for all of them and checks
that every task sees the same cluster, holds its own slot in it, and that no two share an address.
The chief exits 0 when all agree (1 otherwise); the workers and the ps serve until they are ended."""
import json
import os
import sys
import time

shared = sys.argv[1]
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
name = "%s-%d" % (task["type"], task["index"])
with open(os.path.join(shared, "tf-" + name + ".tmp"), "w") as f:
    json.dump(config, f)
os.rename(os.path.join(shared, "tf-" + name + ".tmp"), os.path.join(shared, "tf-" + name))
with open(os.path.join(shared, "pid-" + name), "w") as f:
    f.write(str(os.getpid()))
if task["type"] != "chief":
    while True:
        time.sleep(60)

expected = sum(len(addresses) for addresses in config["cluster"].values())
deadline = time.time() + 120
while len([n for n in os.listdir(shared) if n.startswith("tf-") and not n.endswith(".tmp")]) < expected:
    if time.time() > deadline:
        sys.exit("only some tasks left their TF_CONFIG: " + ", ".join(sorted(os.listdir(shared))))
    time.sleep(0.1)
problems = []
for entry in sorted(n for n in os.listdir(shared) if n.startswith("tf-") and not n.endswith(".tmp")):
    peer = json.load(open(os.path.join(shared, entry)))
    if peer["cluster"] != config["cluster"]:
        problems.append("%s sees another cluster: %s" % (entry, peer["cluster"]))
    job, index = peer["task"]["type"], peer["task"]["index"]
    if index >= len(config["cluster"].get(job, [])):
        problems.append("%s is not in the cluster" % entry)
addresses = [a for job in config["cluster"].values() for a in job]
if len(set(addresses)) != len(addresses):
    problems.append("two tasks share an address: %s" % addresses)
print("checked %d tasks: %s" % (expected, "; ".join(problems) or "all agree"), flush=True)
sys.exit(1 if problems else 0)
