"""Provision the Neo4j community server from Maven Central and run it on loopback."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from ragloom import files
from ragloom.errors import StackError
from ragloom.settings import Settings
from ragloom.stack.process import ManagedProcess, http_ok, port_open

MAIN_CLASS = "org.neo4j.server.CommunityEntryPoint"  # neo4j.mainClass in the 5.26 assembler's pom
ADMIN_CLASS = "org.neo4j.server.startup.Neo4jAdminBoot"
MIN_JAVA = 17

# The assembler pom's dependency tree is exactly the server's classpath.
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ragloom.stack</groupId>
  <artifactId>neo4j-server-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.neo4j.assembly</groupId>
      <artifactId>neo4j-community-standalone</artifactId>
      <version>{version}</version>
      <type>pom</type>
    </dependency>
  </dependencies>
</project>
"""


def _log(msg: str) -> None:
    print(f"[ragloom stack] neo4j: {msg}", flush=True)


def lib_dir(settings: Settings) -> Path:
    return settings.cache_dir / "neo4j" / settings.neo4j_version / "lib"


def java_binary() -> str:
    java = shutil.which("java")
    if java is None:
        raise StackError(f"Neo4j needs Java {MIN_JAVA}+: install a JDK (e.g. apt-get install openjdk-17-jre-headless)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', out)
    if match is None or int(match.group(1)) < MIN_JAVA:
        raise StackError(f"Neo4j 5.26 needs Java {MIN_JAVA}+, found: {out.splitlines()[0] if out else 'unknown'}")
    return java


def provision(settings: Settings) -> Path:
    """Download the server's jars once into the cache with Maven; returns the lib directory."""
    lib = lib_dir(settings)
    marker = lib / ".complete"
    if marker.exists():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError("provisioning Neo4j needs Maven (apt-get install maven) to fetch the server "
                         "from Maven Central")
    started = time.monotonic()
    _log(f"fetching neo4j-community-standalone {settings.neo4j_version} from Maven Central")
    lib.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pom.xml").write_text(POM.format(version=settings.neo4j_version))
        proc = subprocess.run([mvn, "-B", "-q", "dependency:copy-dependencies", f"-DoutputDirectory={lib}",
                               "-DincludeScope=runtime", "-DexcludeTypes=pom"],
                              cwd=tmp, capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackError(f"Maven could not fetch Neo4j {settings.neo4j_version} (is Maven Central reachable?):\n"
                         f"{(proc.stdout + proc.stderr)[-3000:]}")
    if not any(lib.glob("neo4j-server-*.jar")):
        raise StackError(f"Maven finished but {lib} has no neo4j-server jar")
    marker.touch()
    _log(f"provisioned {len(list(lib.glob('*.jar')))} jars in {time.monotonic() - started:.0f}s")
    return lib


def home(settings: Settings) -> Path:
    return settings.stack_dir / "neo4j"


def process(settings: Settings) -> ManagedProcess:
    return ManagedProcess("neo4j", home(settings) / "run" / "neo4j.pid", home(settings) / "logs" / "console.log")


def write_config(settings: Settings) -> Path:
    h = home(settings)
    for sub in ("conf", "data", "logs", "run", "plugins", "import"):
        (h / sub).mkdir(parents=True, exist_ok=True)
    conf = h / "conf" / "neo4j.conf"
    conf.write_text("\n".join([
        "server.default_listen_address=127.0.0.1",
        f"server.bolt.listen_address=127.0.0.1:{settings.neo4j_bolt_port}",
        f"server.http.listen_address=127.0.0.1:{settings.neo4j_http_port}",
        "server.https.enabled=false",
        "server.bolt.tls_level=DISABLED",
        f"server.memory.heap.initial_size={settings.neo4j_heap}",
        f"server.memory.heap.max_size={settings.neo4j_heap}",
        f"server.memory.pagecache.size={settings.neo4j_pagecache}",
        "dbms.security.auth_enabled=true",
        "dbms.usage_report.enabled=false",
        # A keep-alive (NOOP) at least every N s while a request runs, so a connection silent for 2 N s is dead
        # and the driver drops it (the connection.recv_timeout_seconds hint it reads at HELLO): a stopped or
        # wedged server fails a read instead of holding it (docs/design/ingestion.md, failure handling).
        f"server.bolt.connection_keep_alive={settings.neo4j_keep_alive_seconds}s",
        "server.bolt.connection_keep_alive_probes=2",
        "server.bolt.connection_keep_alive_for_requests=ALL",
        f"server.directories.data={h / 'data'}",
        f"server.directories.logs={h / 'logs'}",
        f"server.directories.run={h / 'run'}",
        f"server.directories.plugins={h / 'plugins'}",
        f"server.directories.import={h / 'import'}",
        f"server.directories.lib={lib_dir(settings)}",
        "",
    ]))
    return conf


def _java_env(settings: Settings) -> dict[str, str]:
    return {**os.environ, "NEO4J_HOME": str(home(settings)), "NEO4J_CONF": str(home(settings) / "conf")}


def set_initial_password(settings: Settings, password: str) -> None:
    """Neo4j takes the initial password only before the first start; later changes go through Cypher.

    The password reaches neo4j-admin in an argument file (mode 0600, removed after), never on its command
    line, which every local user can read with `ps`.
    """
    if (home(settings) / "data" / "dbms").exists():
        return
    if "\n" in password or "\r" in password:
        raise StackError("RAGLOOM_NEO4J_PASSWORD must not contain line breaks")
    args = home(settings) / "run" / "initial-password.args"
    try:
        # picocli's @-file syntax: one double-quoted argument with \ and " escaped
        files.write_private(args, '"' + password.replace("\\", "\\\\").replace('"', '\\"') + '"\n')
        proc = subprocess.run([java_binary(), "-cp", f"{lib_dir(settings)}/*", ADMIN_CLASS, "dbms",
                               "set-initial-password", f"@{args}"],
                              env=_java_env(settings), capture_output=True, text=True)
    finally:
        args.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise StackError(f"neo4j-admin set-initial-password failed:\n{(proc.stdout + proc.stderr)[-2000:]}")


def ready(settings: Settings) -> bool:
    if not port_open("127.0.0.1", settings.neo4j_bolt_port):
        return False
    return http_ok(f"http://127.0.0.1:{settings.neo4j_http_port}/")


def start(settings: Settings, password: str) -> float:
    proc = process(settings)
    if proc.up(lambda: ready(settings), (settings.neo4j_bolt_port, settings.neo4j_http_port), "Neo4j",
               "RAGLOOM_NEO4J_BOLT_PORT / RAGLOOM_NEO4J_HTTP_PORT"):
        return 0.0
    java = java_binary()
    lib = provision(settings)
    write_config(settings)
    set_initial_password(settings, password)
    if not proc.running():
        _log(f"starting on bolt://127.0.0.1:{settings.neo4j_bolt_port} (heap {settings.neo4j_heap}, "
             f"page cache {settings.neo4j_pagecache})")
        h = home(settings)
        proc.start([java, f"-Xms{settings.neo4j_heap}", f"-Xmx{settings.neo4j_heap}", "-XX:+UseG1GC",
                    "-XX:+ExitOnOutOfMemoryError", "-Dfile.encoding=UTF-8", "-cp", f"{lib}/*", MAIN_CLASS,
                    f"--home-dir={h}", f"--config-dir={h / 'conf'}"], _java_env(settings), cwd=h)
    return proc.wait_ready(lambda: ready(settings), settings.stack_timeout_seconds, "Neo4j")


def server_version(settings: Settings) -> str | None:
    """Version and edition from the HTTP discovery document (no credentials needed)."""
    import json

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{settings.neo4j_http_port}/", timeout=2) as resp:
            doc = json.load(resp)
        return f"{doc.get('neo4j_version')} {doc.get('neo4j_edition')}"
    except (OSError, ValueError):
        return None
