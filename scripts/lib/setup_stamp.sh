# Set-up stamp (sourced by scripts/setup.sh and scripts/demo.sh): a hash of what scripts/setup.sh
# installs from (the requirements files and the script itself, which pins torch and the model parts).
# setup.sh writes it to var/setup.sha256 when it is done; demo.sh reruns set-up only when needed.
setup_stamp() {
  cat requirements/*.txt scripts/setup.sh | sha256sum | cut -d' ' -f1
}

# setup_needed: true when .venv has no python or requirements/ or setup.sh changed since the last set-up.
setup_needed() {
  [ ! -x .venv/bin/python ] || [ "$(cat var/setup.sha256 2>/dev/null)" != "$(setup_stamp)" ]
}
