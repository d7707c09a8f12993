#!/bin/bash
# Environments beyond pip, with the real tools, over a real sshd: for a
# uv project (uv.lock) and a poetry project (poetry.lock), 'gpurun init'
# writes a setup, persist and pull that work on the first train: the
# tool (from PyPI, in ~/.local/bin on the host as its installers put
# it) makes .venv in the project folder and installs the src/ package
# editable; the job imports the package from its own snapshot. A conda
# project (environment.yml) gets a conda setup; it runs where conda can
# be had. uv and poetry come from scripts/install-deps.sh (PyPI).
. "$(dirname "$0")/../lib.sh"

start_sshd gpuhost || { test_skip 'uv, poetry and conda projects' 'sshd could not start here'; test_done; }
trust_sshd gpuhost
HH=$TRASH/gpuhost-home
T=$TRASH/out && mkdir -p "$T" "$HH/.local/bin"
TOOLS=${GPURUN_PYTOOLS:-/opt/gpurun-pytools/bin}

# mkpkg DIR: a src/ package and a train.py that says where it imported it from.
mkpkg() {
	mkdir -p "$1/src/mypkg" && (cd "$1" && git init -q .) &&
	echo 'VERSION = "one"' >"$1/src/mypkg/__init__.py" &&
	printf '.venv/\n.conda/\n' >"$1/.gitignore" &&
	cat >"$1/train.py" <<'PY'
import os, mypkg
print("version", mypkg.VERSION, "from", os.path.relpath(mypkg.__file__, os.environ["GPURUN_JOB_DIR"]), flush=True)
os.makedirs("checkpoints", exist_ok=True)
open("checkpoints/last.txt", "w").write(mypkg.VERSION)
PY
}
# point DIR NAME: the init-written config at the host, project folder NAME.
point() {
	sed -i -e "s|^#host = .*|host = gpuhost|" -e "s|^path = .*|path = $2|" "$1/gpurun.ini"
}

if [ -x "$TOOLS/uv" ]; then
	ln -s "$TOOLS/uv" "$HH/.local/bin/uv"
	U=$TRASH/uvproj
	# As uv makes a package (its own build backend, built into uv: no
	# download), then our package and trainer in it.
	mkdir -p "$U" && (cd "$U" && "$TOOLS/uv" init -q --package --name mypkg . 2>$T/uinit) &&
	mkpkg "$U"
	test_expect_success 'uv: init writes uv sync --locked, with the lock as an input' '
		cd "$U" && "$TOOLS/uv" lock -q && test -f uv.lock && "$GPURUN" init 2>$T/uerr &&
		test_grep -x "command = export PATH=\"\$HOME/.local/bin:\$PATH\" && uv sync --locked" gpurun.ini &&
		test_grep -x "inputs = uv.lock pyproject.toml" gpurun.ini &&
		test_grep -x "persist = checkpoints/ .venv/" gpurun.ini &&
		test_grep -x "command = .venv/bin/python train.py" gpurun.ini &&
		test_grep "runs uv on the host" gpurun.ini && point "$U" uvproj
	'
	test_expect_success 'uv: the first train works, importing the package from its snapshot' '
		cd "$U" && "$GPURUN" train >$T/uout 2>$T/uerr &&
		test_grep -x "version one from src/mypkg/__init__.py" $T/uout &&
		test -x "$HH/uvproj/.venv/bin/python" && id=$(head -n1 .gpurun/jobs | cut -f1) &&
		test_grep -x "one" "runs/$id/checkpoints/last.txt"
	'
else
	test_skip 'uv projects' "no uv in $TOOLS (scripts/install-deps.sh installs it from PyPI)"
fi

if [ -x "$TOOLS/poetry" ]; then
	ln -s "$TOOLS/poetry" "$HH/.local/bin/poetry"
	Y=$TRASH/poetryproj
	mkpkg "$Y" && cat >"$Y/pyproject.toml" <<'EOF'
[project]
name = "mypkg"
version = "0.1.0"
requires-python = ">=3.9"
dependencies = []

[tool.poetry]
packages = [{ include = "mypkg", from = "src" }]

[build-system]
requires = ["poetry-core>=2.0"]
build-backend = "poetry.core.masonry.api"
EOF
	test_expect_success 'poetry: init writes poetry install into the project'"'"'s .venv' '
		cd "$Y" && HOME=$HH "$TOOLS/poetry" lock -q && test -f poetry.lock &&
		"$GPURUN" init 2>$T/perr &&
		test_grep -x "command = export PATH=\"\$HOME/.local/bin:\$PATH\" && POETRY_VIRTUALENVS_IN_PROJECT=true poetry install --no-interaction" gpurun.ini &&
		test_grep -x "inputs = poetry.lock pyproject.toml" gpurun.ini &&
		test_grep -x "persist = checkpoints/ .venv/" gpurun.ini && point "$Y" poetryproj
	'
	test_expect_success 'poetry: the first train works, importing the package from its snapshot' '
		cd "$Y" && "$GPURUN" train >$T/pout 2>$T/perr &&
		test_grep -x "version one from src/mypkg/__init__.py" $T/pout &&
		test -x "$HH/poetryproj/.venv/bin/python"
	'
else
	test_skip 'poetry projects' "no poetry in $TOOLS (scripts/install-deps.sh installs it from PyPI)"
fi

C=$TRASH/condaproj
mkpkg "$C" && printf 'name: mypkg\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n    - -e .\n' >"$C/environment.yml"
test_expect_success 'conda: init writes a conda prefix in the project, kept by persist' '
	cd "$C" && "$GPURUN" init 2>$T/cerr &&
	test_grep -x "command = conda env update --prefix ./.conda --file environment.yml --prune" gpurun.ini &&
	test_grep -x "inputs = environment.yml" gpurun.ini &&
	test_grep -x "persist = checkpoints/ .conda/" gpurun.ini &&
	test_grep -x "command = .conda/bin/python train.py" gpurun.ini &&
	test_grep "runs conda on the host" gpurun.ini
'
if command -v conda >/dev/null 2>&1; then
	test_expect_success 'conda: the first train works' '
		cd "$C" && point "$C" condaproj && "$GPURUN" train >$T/cout 2>$T/cerr &&
		test_grep -x "version one from src/mypkg/__init__.py" $T/cout
	'
else
	test_skip 'a conda project end to end' 'no conda here: Debian 12 has no conda package, PyPI none that makes environments, and conda channels are not reachable from this machine'
fi

test_done
