# Sourced by ./gpumem and ./run-tests: finds a JDK 25 or newer and exports JAVA_HOME.
# Order: $JAVA_HOME if it is new enough, then the JDKs installed under the usual folders (newest first).
# Prints a clear error and returns 1 when there is none.

gpumem_java_major() { # $1 = a java executable; sets gpumem_major to its feature version (17, 25, ...), or ""
  # The JDK's release file says it without starting a JVM (a JVM start per candidate cost ~0.2 s, and the search
  # tries every JDK installed), read with shell built-ins only and no subshell (the launcher's own time counts in
  # every short command); a JDK without one is asked by running it.
  local release=${1%/bin/java}/release key value
  gpumem_major=""
  if [ -r "$release" ]; then
    while IFS='=' read -r key value; do
      [ "$key" = JAVA_VERSION ] || continue
      value=${value//\"/}
      case $value in 1.*) value=${value#1.} ;; esac  # JDK 8 and older: "1.8.0"
      gpumem_major=${value%%[!0-9]*}
      return 0
    done <"$release"
  fi
  gpumem_major=$("$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p' | head -n1 | cut -d. -f1)
}

gpumem_find_jdk() {
  local min=25 cand major best="" bestmajor=0 gpumem_major
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/javac" ]; then
    gpumem_java_major "$JAVA_HOME/bin/java"; major=$gpumem_major
    if [ -n "$major" ] && [ "$major" -ge "$min" ]; then
      export JAVA_HOME; return 0
    fi
  fi
  for cand in /usr/lib/jvm/* /opt/java/* /opt/jdk* /usr/local/jdk* "$HOME"/.sdkman/candidates/java/* "$HOME"/.jdks/*; do
    [ -x "$cand/bin/javac" ] || continue
    gpumem_java_major "$cand/bin/java"; major=$gpumem_major
    [ -n "$major" ] || continue
    if [ "$major" -ge "$min" ] && [ "$major" -gt "$bestmajor" ]; then best=$cand; bestmajor=$major; fi
  done
  if [ -z "$best" ] && command -v javac >/dev/null 2>&1; then
    cand=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
    gpumem_java_major "$cand/bin/java"; major=$gpumem_major
    if [ -n "$major" ] && [ "$major" -ge "$min" ]; then best=$cand; fi
  fi
  if [ -z "$best" ]; then
    echo "gpumem: needs a JDK $min or newer, and found none (JAVA_HOME=${JAVA_HOME:-unset}; searched /usr/lib/jvm, /opt, ~/.sdkman, ~/.jdks)." >&2
    echo "gpumem: install one (for example Temurin 25) or point JAVA_HOME at it." >&2
    return 1
  fi
  export JAVA_HOME=$best
}

gpumem_require_maven() {
  if ! command -v mvn >/dev/null 2>&1; then
    echo "gpumem: Apache Maven (mvn) is needed to build gpumem and is not on PATH (Debian: apt-get install maven)." >&2
    return 1
  fi
}
