# firstfault in a container: the README's set-up (scripts/install.sh, which scripts/setup-and-test.sh also runs), the
# demo built into the image, and the HTTP API serving the demo's warehouse.
#
#   docker build -t firstfault .
#   docker run --rm -p 8080:8080 -e FIRSTFAULT_API_TOKEN="$(openssl rand -hex 32)" firstfault   # API on the demo
#                                                               # (no token in the image: it refuses to start without one)
#   docker run --rm firstfault firstfault demo --dir /tmp/demo  # the demo's verdict table
#   docker run --rm -v "$PWD:/data" firstfault firstfault attribute --static /data/attempt.yaml --warehouse /data/firstfault.duckdb
FROM python:3.11-slim-bookworm

WORKDIR /opt/firstfault
COPY . .
RUN bash scripts/install.sh \
    && .venv/bin/firstfault -q demo --dir /var/lib/firstfault/demo --fleet 0 >/dev/null \
    && .venv/bin/firstfault -q report --warehouse /var/lib/firstfault/demo/firstfault.duckdb --out /var/lib/firstfault/report \
    && rm -rf /root/.cache

ENV PATH=/opt/firstfault/.venv/bin:$PATH
EXPOSE 8080
CMD ["firstfault", "api", "--host", "0.0.0.0", "--port", "8080", "--config", "/opt/firstfault/scripts/container-api.toml", "--warehouse", "/var/lib/firstfault/demo/firstfault.duckdb"]
