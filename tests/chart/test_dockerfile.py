"""The container image (Dockerfile, .dockerignore): checked by reading, no Docker engine."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib

from dockerfile_parse import DockerfileParser

from conftest import REPO, container


def parsed():
    df = DockerfileParser(path=str(REPO / "Dockerfile"))
    return df, df.structure


def stages(structure):
    """[(FROM value, [instructions of that stage])]."""
    out = []
    for ins in structure:
        if ins["instruction"] == "FROM":
            out.append((ins["value"], []))
        elif out:
            out[-1][1].append(ins)
        else:
            assert ins["instruction"] in ("ARG", "COMMENT"), f"{ins['instruction']} before the first FROM"
    return out


def test_dockerfile_parses_into_a_builder_and_a_runtime_stage():
    df, structure = parsed()
    st = stages(structure)
    assert len(st) == 2, [s[0] for s in st]
    builder, runtime = st
    assert re.match(r"^rust:1-bookworm\s+AS\s+builder$", builder[0], re.I), builder[0]
    runtime_image = runtime[0].split()[0]
    assert runtime_image in ("gcr.io/distroless/cc-debian12:nonroot",) or runtime_image.startswith("debian:"), runtime_image
    runs = " ".join(i["value"] for i in builder[1] if i["instruction"] == "RUN")
    assert "cargo build --release --locked" in runs
    assert df.baseimage == runtime[0].split()[0]


def test_runtime_runs_as_non_root_with_the_binary_as_entrypoint():
    _, structure = parsed()
    _, runtime = stages(structure)[-1]
    users = [i["value"].strip() for i in runtime if i["instruction"] == "USER"]
    assert users, "the runtime stage sets no USER"
    user = users[-1].split(":")[0]
    assert user not in ("0", "root", "")
    if user.isdigit():
        assert int(user) == 65532
    entry = [i["value"] for i in runtime if i["instruction"] == "ENTRYPOINT"]
    assert entry and json.loads(entry[-1]) == ["/node-maintenance"], "exec-form ENTRYPOINT [\"/node-maintenance\"]"
    copies = [i["value"] for i in runtime if i["instruction"] == "COPY"]
    assert any("--from=builder" in c and c.rstrip().endswith("/node-maintenance") for c in copies), copies


def test_image_user_matches_the_chart_security_context(render):
    _, structure = parsed()
    _, runtime = stages(structure)[-1]
    user = [i["value"].strip() for i in runtime if i["instruction"] == "USER"][-1]
    uid, _, gid = user.partition(":")
    pod = render()
    psc = next(o for o in pod if o["kind"] == "Deployment")["spec"]["template"]["spec"]["securityContext"]
    assert str(psc["runAsUser"]) == uid
    if gid:
        assert str(psc["runAsGroup"]) == gid


def test_exposed_ports_are_the_chart_container_ports(render):
    _, structure = parsed()
    _, runtime = stages(structure)[-1]
    exposed = {int(p.split("/")[0]) for i in runtime if i["instruction"] == "EXPOSE" for p in i["value"].split()}
    assert exposed == {p["containerPort"] for p in container(render())["ports"]}


def ignore_patterns():
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [l.strip() for l in lines if l.strip() and not l.strip().startswith("#")]


def ignored(path: str) -> bool:
    """Whether .dockerignore keeps `path` (relative) out of the build context."""
    parts = path.split("/")
    result = False
    for pat in ignore_patterns():
        negate = pat.startswith("!")
        pat = pat.lstrip("!").strip("/")
        hit = False
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if fnmatch.fnmatchcase(prefix, pat) or (
                pat.startswith("**/") and fnmatch.fnmatchcase(parts[i - 1], pat[3:])
            ):
                hit = True
        if hit:
            result = not negate
    return result


def test_dockerignore_keeps_what_the_build_needs():
    needed = ["Cargo.toml", "Cargo.lock", "src/main.rs", "src/lib.rs"]
    manifest = tomllib.loads((REPO / "Cargo.toml").read_text())
    for section in ("lib",):
        if "path" in manifest.get(section, {}):
            needed.append(manifest[section]["path"])
    for section in ("bin", "bench", "example", "test"):
        for target in manifest.get(section, []):
            if "path" in target:
                needed.append(target["path"])
    # Files pulled in at compile time by include_str!/include_bytes! in src/.
    for rs in (REPO / "src").rglob("*.rs"):
        for m in re.finditer(r'include_(?:str|bytes)!\(\s*"([^"]+)"', rs.read_text()):
            target = (rs.parent / m.group(1)).resolve()
            needed.append(str(target.relative_to(REPO)))
    kept_out = [p for p in needed if ignored(p)]
    assert not kept_out, f".dockerignore excludes files the build needs: {kept_out}"


def test_dockerignore_keeps_secrets_and_build_output_out():
    for path in ("target/debug/node-maintenance", ".git/config", "certs/tls.key", "charts/node-maintenance/values.yaml"):
        assert ignored(path), path
