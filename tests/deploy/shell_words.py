"""The locksim command lines in a piece of shell text (a manifest's `sh -c` script, a CI job's script, a README's
code block, a Containerfile's comment), as argument lists, without running anything."""
import os
import re
import shlex

# Tokens made only of these characters are shell operators: they end a simple command.
OPERATOR_CHARS = set("();<>|&")
CONTAINER_TOOLS = {"podman", "docker", "buildah", "nerdctl"}
# An image reference whose repository's last component is locksim: `locksim`, `locksim:0.1.0`,
# `ghcr.io/example/locksim:0.1.0`. After `podman run ... IMAGE`, the words are the entrypoint's (locksim's).
IMAGE_RE = re.compile(r"^([\w.-]+(:\d+)?/)*locksim(:[\w.-]+)?(@sha256:[0-9a-f]+)?$")


def lines(text):
    """Shell lines: backslash-newline continuations joined."""
    return re.sub(r"\\\n", " ", text).splitlines()


def words(line):
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    return list(lex)


def segments(line):
    """The simple commands of one line, each a list of words."""
    out, cur = [], []
    for w in words(line):
        if w and set(w) <= OPERATOR_CHARS:
            out.append(cur)
            cur = []
        else:
            cur.append(w)
    out.append(cur)
    return [s for s in out if s]


def locksim_args(seg):
    """The arguments given to locksim in one simple command, or None when it runs no locksim."""
    if seg[0] in CONTAINER_TOOLS:
        # `podman run [OPTIONS] IMAGE ARGS...`: the words after the image are the entrypoint's (locksim's); any
        # other subcommand (build, push, ...) names the image without running it.
        if "run" not in seg[1:3]:
            return None
        for i, w in enumerate(seg):
            if IMAGE_RE.match(w) and seg[i - 1] not in ("--name", "-t", "--tag"):
                return seg[i + 1 :]
        return None
    for i, w in enumerate(seg):
        if os.path.basename(w) == "locksim" and (i == 0 or seg[i - 1] not in ("--name", "-t", "--tag")):
            return seg[i + 1 :]
    return None


def locksim_commands(text):
    """Every locksim command line in a shell text, in order."""
    cmds = []
    for line in lines(text):
        for seg in segments(line):
            args = locksim_args(seg)
            if args is not None:
                cmds.append(args)
    return cmds


def options(args):
    """The options of one command line as {'--seeds': '1000', '--resume': True}, and its positional words.
    A word after an option is its value unless it starts with '-' (the files name the scenario first)."""
    opts, pos, i = {}, [], 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) > 1:
            if "=" in a:
                k, v = a.split("=", 1)
                opts[k] = v
            elif i + 1 < len(args) and not args[i + 1].startswith("-"):
                opts[a] = args[i + 1]
                i += 1
            else:
                opts[a] = True
        else:
            pos.append(a)
        i += 1
    return opts, pos


def shard_total(opts):
    """N of --shards N, --shard K/N or --shard-number K/N (1 when the command is not sharded)."""
    for key in ("--shard", "--shard-number"):
        v = opts.get(key)
        if isinstance(v, str) and "/" in v:
            total = v.rsplit("/", 1)[1]
            return int(total) if total.isdigit() else 1
    v = opts.get("--shards")
    return int(v) if isinstance(v, str) and v.isdigit() else 1


def cut_seeds(text, seeds):
    """The same text with every `--seeds N` replaced by `--seeds SEEDS`."""
    return re.sub(r"--seeds([ =])\d+", lambda m: f"--seeds{m.group(1)}{seeds}", text)


def cut_seeds_args(args, seeds):
    """The same argument list with the value of --seeds replaced by SEEDS."""
    out = list(args)
    for i, a in enumerate(out):
        if a == "--seeds" and i + 1 < len(out):
            out[i + 1] = str(seeds)
        elif a.startswith("--seeds="):
            out[i] = f"--seeds={seeds}"
    return out
