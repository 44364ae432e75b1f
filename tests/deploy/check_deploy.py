#!/usr/bin/env python3
"""Checks the files that run a sweep beyond one machine against the built locksim:
  deploy/kubernetes/*.yaml and README.md, examples/ci/gitlab-ci.yml and github-workflow.yml, Containerfile and
  .dockerignore.
Each YAML file parses; the Kubernetes Job and the CI examples have the shape a sweep needs (shard counts agree,
outputs land where the merge reads them); and every locksim command line in them runs with the current command
line, cut down to a few seeds: every locksim exits 0 or 1, never 2, and each sweep job's own script exits 0.

usage: check_deploy.py LOCKSIM SOURCE_DIR WORK_DIR            check the files; exit 1 naming every problem
       check_deploy.py LOCKSIM SOURCE_DIR WORK_DIR --mutants  check broken copies: exit 1 unless each is caught
"""
import fnmatch
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shell_words import cut_seeds, cut_seeds_args, lines, locksim_commands, options, shard_total  # noqa: E402

K8S = "deploy/kubernetes"
FILES = [f"{K8S}/results-pvc.yaml", f"{K8S}/sweep-job.yaml", f"{K8S}/merge-job.yaml", f"{K8S}/README.md",
         "examples/ci/gitlab-ci.yml", "examples/ci/github-workflow.yml", "Containerfile", ".dockerignore"]
# Read by the CLI to pick a shard: never inherited from the environment this test runs in (a CI job of its own).
SHARD_VARS = ("JOB_COMPLETION_INDEX", "CI_NODE_INDEX", "CI_NODE_TOTAL")
MATRIX_SHARD = "${{ matrix.shard }}"
SHIM = '#!/bin/sh\n"$LOCKSIM_REAL" "$@"\nrc=$?\nprintf \'%s %s\\n\' "$rc" "$*" >>"$LOCKSIM_SHIM_LOG"\nexit $rc\n'


class Sandbox:
    """A scratch directory and a `locksim` first on PATH that runs the built binary and logs each exit code."""

    def __init__(self, locksim, work):
        self.locksim, self.work = locksim, work
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(os.path.join(work, "bin"))
        shim = os.path.join(work, "bin", "locksim")
        with open(shim, "w") as f:
            f.write(SHIM)
        os.chmod(shim, 0o755)
        self.log = os.path.join(work, "locksim-calls.log")

    def dir(self, name):
        d = os.path.join(self.work, name)
        os.makedirs(d, exist_ok=True)
        return d

    def run(self, argv, cwd, env=None):
        e = {k: v for k, v in os.environ.items() if k not in SHARD_VARS}
        e.update(PATH=os.path.join(self.work, "bin") + os.pathsep + e.get("PATH", "/usr/bin:/bin"),
                 LOCKSIM_REAL=self.locksim, LOCKSIM_SHIM_LOG=self.log)
        e.update(env or {})
        p = subprocess.run(argv, cwd=cwd, env=e, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        return p.returncode, p.stdout

    def calls(self):
        """The locksim runs since the last call, as (exit code, arguments); the log starts again."""
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            out = [(int(line.split(" ", 1)[0]), line.rstrip("\n").partition(" ")[2]) for line in f]
        os.remove(self.log)
        return out


class Checker:
    def __init__(self, src, texts, sandbox):
        self.src, self.texts, self.box, self.errors = src, texts, sandbox, []

    def err(self, path, msg):
        self.errors.append(f"{path}: {msg}")

    def yaml_docs(self, path):
        try:
            return [d for d in yaml.safe_load_all(self.texts[path]) if d is not None]
        except yaml.YAMLError as e:
            self.err(path, f"does not parse as YAML: {e}")
            return []

    def expect_calls(self, path, what, count):
        """Every locksim run of `what` exited 0 or 1, and there were `count` of them."""
        calls = self.box.calls()
        for rc, args in calls:
            if rc not in (0, 1):
                self.err(path, f"`locksim {args}` exited {rc} (0 or 1 expected: 2 is a usage or input error)")
        if len(calls) != count:
            self.err(path, f"{what}: {len(calls)} locksim run(s), {count} expected")

    def one_command(self, path, text, sub):
        cmds = locksim_commands(text)
        if len(cmds) != 1 or not cmds[0] or cmds[0][0] != sub:
            self.err(path, f"one `locksim {sub}` command line expected, found {[' '.join(c) for c in cmds]}")
            return None
        return options(cmds[0][1:])

    def run_script(self, path, what, argv, cwd, env, want):
        rc, out = self.box.run(argv, cwd, env)
        if rc not in want:
            self.err(path, f"{what} exited {rc} ({' or '.join(map(str, want))} expected):\n{out.rstrip()}")

    def check_paths(self, path, opts, dirs, what):
        for key in ("--out", "--replay-out"):
            v = opts.get(key)
            if not isinstance(v, str) or "{shard}" not in v:
                self.err(path, f"{key} must name a file per shard with {{shard}}, not {v!r}")
            elif not any(v.startswith(d.rstrip("/") + "/") for d in dirs):
                self.err(path, f"{key} {v} is not under {what} ({', '.join(dirs) or 'none'})")

    def check_merge_reads(self, path, merge_files, out):
        pattern_ok = out and merge_files and any(fnmatch.fnmatch(out.replace("{shard}", "0"), f) for f in merge_files)
        if not pattern_ok:
            self.err(path, f"`locksim merge {' '.join(merge_files)}` does not read the sweep's output {out}")

    # ---- Kubernetes ----------------------------------------------------------------------------------------------
    def container_argv(self, path, job):
        pod = job.get("spec", {}).get("template", {}).get("spec", {})
        cs = pod.get("containers") or []
        if len(cs) != 1:
            self.err(path, "one container expected")
            return pod, {}, []
        argv = list(cs[0].get("command") or []) + list(cs[0].get("args") or [])
        if not argv:
            self.err(path, "the container has neither command nor args (the image's entrypoint alone runs no sweep)")
        return pod, cs[0], [str(a) for a in argv]

    def script_of(self, argv):
        if len(argv) == 3 and argv[0] in ("sh", "bash") and argv[1] == "-c":
            return argv[2]
        return " ".join(argv)

    def mounts(self, path, pod, container):
        """mountPath -> claimName for the container's volumes backed by a PersistentVolumeClaim."""
        claims = {v.get("name"): (v.get("persistentVolumeClaim") or {}).get("claimName")
                  for v in pod.get("volumes") or []}
        out = {}
        for m in container.get("volumeMounts") or []:
            if claims.get(m.get("name")):
                out[m.get("mountPath", "")] = claims[m.get("name")]
            else:
                self.err(path, f"volume mount {m.get('name')} is not a PersistentVolumeClaim of the pod")
        return out

    def check_kubernetes(self):
        pvc_path, sweep_path, merge_path = (f"{K8S}/results-pvc.yaml", f"{K8S}/sweep-job.yaml", f"{K8S}/merge-job.yaml")
        pvcs = [d for d in self.yaml_docs(pvc_path) if d.get("kind") == "PersistentVolumeClaim"]
        claim = pvcs[0].get("metadata", {}).get("name") if pvcs else None
        if not pvcs or "ReadWriteMany" not in (pvcs[0].get("spec", {}).get("accessModes") or []):
            self.err(pvc_path, "a PersistentVolumeClaim with accessModes [ReadWriteMany] expected")
        jobs = self.yaml_docs(sweep_path)
        if len(jobs) != 1 or jobs[0].get("kind") != "Job" or jobs[0].get("apiVersion") != "batch/v1":
            self.err(sweep_path, "one batch/v1 Job expected")
            return
        spec = jobs[0].get("spec", {})
        n = spec.get("completions")
        if spec.get("completionMode") != "Indexed":
            self.err(sweep_path, "spec.completionMode must be Indexed (each pod's JOB_COMPLETION_INDEX is its shard)")
        if not isinstance(n, int) or n < 1 or spec.get("parallelism") != n:
            self.err(sweep_path, f"completions ({n}) and parallelism ({spec.get('parallelism')}) must be equal")
            return
        pod, container, argv = self.container_argv(sweep_path, jobs[0])
        script = self.script_of(argv)
        cmd = self.one_command(sweep_path, script, "explore")
        if cmd is None:
            return
        opts, files = cmd
        if opts.get("--shards") != str(n) or "--shard" in opts or "--shard-number" in opts:
            self.err(sweep_path, f"--shards must be {n} (= completions), not {opts.get('--shards')!r}")
        mounts = self.mounts(sweep_path, pod, container)
        self.check_paths(sweep_path, opts, list(mounts), "a volume mount")
        for mp, c in mounts.items():
            if c != claim:
                self.err(sweep_path, f"{mp} mounts claim {c!r}, not the results claim {claim!r}")

        # Every pod of the Job, with its own index, its outputs on a directory that stands for the claim.
        cwd = self.box.dir("kubernetes")
        for mp in mounts:
            os.makedirs(cwd + mp, exist_ok=True)
        seeds = 2 * n

        def local(text):
            for mp in mounts:
                text = text.replace(mp, cwd + mp)
            return cut_seeds(text, seeds)

        for k in range(n):
            self.run_script(sweep_path, f"pod {k}", [local(a) for a in argv], cwd, {"JOB_COMPLETION_INDEX": str(k)},
                            (0,))
        self.expect_calls(sweep_path, "the sweep", n)

        merges = self.yaml_docs(merge_path)
        if len(merges) != 1 or merges[0].get("kind") != "Job":
            self.err(merge_path, "one Job expected")
            return
        mpod, mcontainer, margv = self.container_argv(merge_path, merges[0])
        cmd = self.one_command(merge_path, self.script_of(margv), "merge")
        if cmd is None:
            return
        mopts, mfiles = cmd
        mmounts = self.mounts(merge_path, mpod, mcontainer)
        if claim not in mmounts.values():
            self.err(merge_path, f"does not mount the results claim {claim!r}")
        self.check_merge_reads(merge_path, mfiles, opts.get("--out"))
        self.run_script(merge_path, "the merge", [local(a) for a in margv], cwd, {}, (0, 1))
        self.expect_calls(merge_path, "the merge", 1)
        self.check_readme(cwd, local)

    def check_readme(self, cwd, local):
        path = f"{K8S}/README.md"
        text = self.texts[path]
        if "ReadWriteMany" not in text:
            self.err(path, "must state the shared-storage requirement (a ReadWriteMany PersistentVolumeClaim)")
        for f in FILES[:3]:
            if os.path.basename(f) not in text:
                self.err(path, f"does not mention {os.path.basename(f)}")
        blocks = re.findall(r"^```(sh|bash|shell|console)?\n(.*?)^```", text, re.M | re.S)
        count = 0
        for _, body in blocks:
            body = "\n".join(ln[2:] if ln.startswith("$ ") else ln for ln in body.splitlines())
            for args in locksim_commands(body):
                count += 1
                opts = options(args[1:])[0] if args else {}
                argv = ["locksim"] + [local(a) for a in cut_seeds_args(args, 2 * shard_total(opts))]
                argv = [x for a in argv for x in (sorted(glob.glob(a, root_dir=cwd)) or [a] if "*" in a else [a])]
                env = {"JOB_COMPLETION_INDEX": "0"} if "--shards" in opts else {}
                self.run_script(path, f"`{' '.join(['locksim'] + args)}`", argv, cwd, env, (0, 1))
        if count == 0:
            self.err(path, "no locksim command line in its code blocks")
        self.expect_calls(path, "the code blocks' commands", count)

    # ---- GitLab ----------------------------------------------------------------------------------------------------
    def check_gitlab(self):
        path = "examples/ci/gitlab-ci.yml"
        docs = self.yaml_docs(path)
        if len(docs) != 1:
            return self.err(path, "one YAML document expected")
        doc = docs[0]
        reserved = {"stages", "default", "variables", "include", "workflow", "image", "services", "cache"}
        jobs = {k: v for k, v in doc.items() if k not in reserved and not k.startswith(".") and isinstance(v, dict)}
        sweeps = [k for k, v in jobs.items() if "parallel" in v]
        merges = [k for k, v in jobs.items() if any("locksim merge" in " ".join(str(s).split()) for s in v.get("script", []))]
        if len(sweeps) != 1 or len(merges) != 1:
            return self.err(path, f"one job with `parallel` and one merge job expected, found {sweeps} and {merges}")
        sweep, merge = jobs[sweeps[0]], jobs[merges[0]]
        image = sweep.get("image", doc.get("default", {}).get("image"))
        if not isinstance(image, dict) or image.get("entrypoint") != [""]:
            self.err(path, "the image needs `entrypoint: [\"\"]`: its entrypoint is locksim, GitLab needs a shell")
        n = sweep["parallel"]
        if not isinstance(n, int) or n < 2:
            return self.err(path, f"parallel must be a whole number of jobs from 2, not {n!r}")
        script = "\n".join(map(str, sweep.get("before_script", []) + sweep.get("script", [])))
        cmd = self.one_command(path, script, "explore")
        if cmd is None:
            return
        opts, files = cmd
        if opts.get("--shards") != str(n) or "--shard" in opts or "--shard-number" in opts:
            self.err(path, f"--shards must be {n} (= parallel; the CLI reads CI_NODE_INDEX), not {opts.get('--shards')!r}")
        self.check_paths(path, opts, sweep.get("artifacts", {}).get("paths", []), "the job's artifacts: paths")
        needs = merge.get("needs")
        if needs is not None and sweeps[0] not in [x if isinstance(x, str) else x.get("job") for x in needs]:
            self.err(path, f"the merge job must need {sweeps[0]} (its artifacts)")
        stages = doc.get("stages", [])
        if sweep.get("stage") in stages and merge.get("stage") in stages and \
                stages.index(merge["stage"]) <= stages.index(sweep["stage"]):
            self.err(path, "the merge job's stage must come after the sweep's")
        mscript = "\n".join(map(str, merge.get("script", [])))
        cmd = self.one_command(path, mscript, "merge")
        if cmd is None:
            return
        mopts, mfiles = cmd
        self.check_merge_reads(path, mfiles, opts.get("--out"))
        cwd = self.box.dir("gitlab")
        for i in range(1, n + 1):
            self.run_script(path, f"job {sweeps[0]} {i}/{n}", ["bash", "-eo", "pipefail", "-c", cut_seeds(script, 2 * n)],
                            cwd, {"CI_NODE_INDEX": str(i), "CI_NODE_TOTAL": str(n)}, (0,))
        self.expect_calls(path, "the parallel jobs", n)
        self.run_script(path, f"job {merges[0]}", ["bash", "-eo", "pipefail", "-c", mscript], cwd, {}, (0, 1))
        self.expect_calls(path, "the merge job", 1)

    # ---- GitHub ----------------------------------------------------------------------------------------------------
    def check_github(self):
        path = "examples/ci/github-workflow.yml"
        docs = self.yaml_docs(path)
        if len(docs) != 1:
            return self.err(path, "one YAML document expected")
        doc = docs[0]
        if "on" not in doc and True not in doc:  # YAML 1.1 reads a bare `on` key as true
            self.err(path, "no `on:` trigger")
        jobs = doc.get("jobs") or {}
        sweeps = [k for k, v in jobs.items() if "shard" in (v.get("strategy", {}).get("matrix") or {})]
        merges = [k for k, v in jobs.items() if any("locksim merge" in s.get("run", "") for s in v.get("steps", []))]
        if len(sweeps) != 1 or len(merges) != 1:
            return self.err(path, f"one job with matrix.shard and one merge job expected, found {sweeps} and {merges}")
        sweep, merge = jobs[sweeps[0]], jobs[merges[0]]
        shards = sweep["strategy"]["matrix"]["shard"]
        n = len(shards) if isinstance(shards, list) else 0
        if n < 2 or shards != list(range(1, n + 1)):
            return self.err(path, f"matrix.shard must list 1..N (the shards, 1-based), not {shards!r}")
        script = "\n".join(s["run"] for s in sweep.get("steps", []) if "run" in s)
        cmd = self.one_command(path, script.replace(MATRIX_SHARD, "K"), "explore")
        if cmd is None:
            return
        opts, files = cmd
        if opts.get("--shard-number") != f"K/{n}" or "--shards" in opts or "--shard" in opts:
            self.err(path, f"--shard-number must be ${{{{ matrix.shard }}}}/{n}, not {opts.get('--shard-number')!r}")
        uploads = [s.get("with", {}) for s in sweep.get("steps", []) if str(s.get("uses", "")).startswith(
            "actions/upload-artifact@")]
        if len(uploads) != 1 or MATRIX_SHARD not in str(uploads[0].get("name", "")):
            self.err(path, "one actions/upload-artifact step expected, named per shard with ${{ matrix.shard }}")
        self.check_paths(path, opts, [str(u.get("path", "")) for u in uploads], "the uploaded path")
        if sweeps[0] not in ([merge.get("needs")] if isinstance(merge.get("needs"), str) else merge.get("needs") or []):
            self.err(path, f"the merge job must need {sweeps[0]}")
        downloads = [s.get("with", {}) for s in merge.get("steps", []) if str(s.get("uses", "")).startswith(
            "actions/download-artifact@")]
        if len(downloads) != 1 or downloads[0].get("merge-multiple") is not True:
            self.err(path, "one actions/download-artifact step with merge-multiple: true expected (one directory)")
        mscript = "\n".join(s["run"] for s in merge.get("steps", []) if "run" in s)
        cmd = self.one_command(path, mscript, "merge")
        if cmd is None:
            return
        mopts, mfiles = cmd
        self.check_merge_reads(path, mfiles, opts.get("--out"))
        if downloads and not all(f.startswith(str(downloads[0].get("path", "")).rstrip("/") + "/") for f in mfiles):
            self.err(path, f"the merge reads {mfiles}, not files in the download path {downloads[0].get('path')!r}")
        cwd = self.box.dir("github")
        for k in shards:
            text = cut_seeds(script.replace(MATRIX_SHARD, str(k)), 2 * n)
            if "${{" in text:
                self.err(path, "an expression other than ${{ matrix.shard }} in a run step (this test cannot run it)")
                return
            self.run_script(path, f"shard {k}", ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", text], cwd,
                            {}, (0,))
        self.expect_calls(path, "the matrix jobs", n)
        self.run_script(path, "the merge job", ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", mscript],
                        cwd, {}, (0, 1))
        self.expect_calls(path, "the merge job", 1)

    # ---- Containerfile -------------------------------------------------------------------------------------------
    def check_container(self):
        path = "Containerfile"
        insts = [ln.strip() for ln in lines(self.texts[path]) if ln.strip() and not ln.lstrip().startswith("#")]
        froms = [i.split()[1] for i in insts if i.upper().startswith("FROM ")]
        if not froms or any(f != "debian:12" for f in froms):
            self.err(path, f"every stage must start FROM debian:12, not {froms}")
        if not any(re.match(r"COPY\s+\.\s", i) for i in insts):
            self.err(path, "no `COPY . DIR` of the source")
        if not any(i.startswith("RUN ") and "bash .ci/quickstart build" in i for i in insts):
            self.err(path, "no `RUN bash .ci/quickstart build` (the quick start's set-up)")
        entry = [i for i in insts if i.startswith("ENTRYPOINT ")]
        cmd = [i for i in insts if i.startswith("CMD ")]
        try:
            entry_argv = json.loads(entry[-1][len("ENTRYPOINT "):]) if entry else None
            cmd_argv = json.loads(cmd[-1][len("CMD "):]) if cmd else []
        except json.JSONDecodeError as e:
            return self.err(path, f"ENTRYPOINT and CMD must be JSON lists: {e}")
        if entry_argv != ["locksim"]:
            self.err(path, f'ENTRYPOINT must be ["locksim"], not {entry_argv}')
        cwd = self.box.dir("container")
        self.run_script(path, f"ENTRYPOINT + CMD `locksim {' '.join(cmd_argv)}`", ["locksim"] + cmd_argv, cwd, {},
                        (0, 1))
        # The usage lines in its comments are commands a person copies too.
        comments = [ln.lstrip()[1:].strip() for ln in self.texts[path].splitlines() if ln.lstrip().startswith("#")]
        extra = locksim_commands("\n".join(c for c in comments if re.match(r"(podman|docker|locksim) ", c)))
        for args in extra:
            self.run_script(path, f"`locksim {' '.join(args)}`", ["locksim"] + cut_seeds_args(args, 2),
                            cwd, {}, (0, 1))
        self.expect_calls(path, "ENTRYPOINT + CMD and the commands in its comments", 1 + len(extra))
        ignore = [ln.strip() for ln in self.texts[".dockerignore"].splitlines() if ln.strip() and ln[0] != "#"]
        if not any(fnmatch.fnmatch("build/", p) or p.rstrip("/") in ("build", "build*") for p in ignore):
            self.err(".dockerignore", "must keep build/ out of the image's build context")


# The checks, by the files each reads.
PARTS = {
    "kubernetes": (FILES[0], FILES[1], FILES[2], FILES[3]),
    "gitlab": ("examples/ci/gitlab-ci.yml",),
    "github": ("examples/ci/github-workflow.yml",),
    "container": ("Containerfile", ".dockerignore"),
}


def check(locksim, src, texts, work, only=None):
    """The problems found; `only`: the checks that read that file (all when None)."""
    c = Checker(src, texts, Sandbox(locksim, work))
    for name, files in PARTS.items():
        if only is None or only in files:
            try:
                getattr(c, f"check_{name}")()
            except Exception as e:  # a file of an unexpected shape: a problem to report, not a traceback
                c.err(" ".join(files), f"not of the expected shape ({type(e).__name__}: {e})")
    return c.errors


# Broken copies the checks must catch, one each: (file, text in it, replacement of every occurrence).
MUTANTS = [
    (f"{K8S}/sweep-job.yaml", "--shards 20", "--shard-count 20"),  # an option the CLI does not have
    (f"{K8S}/sweep-job.yaml", "--no-progress", "--no-progres"),  # caught by running it: exit 2
    (f"{K8S}/sweep-job.yaml", "parallelism: 20", "parallelism: 10"),
    (f"{K8S}/sweep-job.yaml", "mountPath: /results", "mountPath: /data"),
    (f"{K8S}/merge-job.yaml", "locksim merge", "locksim merge --all"),
    (f"{K8S}/README.md", "ReadWriteMany", "shared storage"),
    (f"{K8S}/README.md", "--shard 3/20", "--shard 3:20"),
    ("examples/ci/gitlab-ci.yml", "parallel: 20", "parallel: 21"),
    ("examples/ci/gitlab-ci.yml", "mkdir -p results", "echo no results directory"),  # explore cannot open its --out: exit 2
    ("examples/ci/github-workflow.yml", "}}/20", "}}/19"),
    ("examples/ci/github-workflow.yml", "--mode anything", "--mode everything"),
    ("Containerfile", 'CMD ["--help"]', 'CMD ["--hlep"]'),
]


def main():
    if len(sys.argv) not in (4, 5) or (len(sys.argv) == 5 and sys.argv[4] != "--mutants"):
        sys.exit(__doc__)
    locksim, src, work = os.path.abspath(sys.argv[1]), sys.argv[2], os.path.abspath(sys.argv[3])
    texts = {}
    for f in FILES:
        with open(os.path.join(src, f)) as fh:
            texts[f] = fh.read()
    if len(sys.argv) == 4:
        errors = check(locksim, src, texts, work)
        for e in errors:
            print(f"error: {e}")
        print(f"deploy files: {len(errors)} problem(s)")
        sys.exit(1 if errors else 0)
    missed = 0
    for f, old, new in MUTANTS:
        if old not in texts[f]:
            print(f"error: mutant {f}: {old!r} is not in the file (update MUTANTS)")
            missed += 1
            continue
        errors = check(locksim, src, dict(texts, **{f: texts[f].replace(old, new)}), work, only=f)
        print(f"{'caught' if errors else 'MISSED'}: {f}: {old!r} -> {new!r}" + (f"\n    {errors[0]}" if errors else ""))
        missed += not errors
    print(f"mutants: {len(MUTANTS) - missed} caught, {missed} missed")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
