# A worker pool in a container: `docker build -t queuectl .`, then
#   docker run -d --name queuectl -v queuectl-data:/var/lib/queuectl queuectl
#   docker exec queuectl queuectl enqueue "echo Hello"
# The queue is the SQLite file on the volume; pools in other containers share it through the
# same volume on the same host, or through PostgreSQL (QUEUECTL_DB=postgresql://...).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY queuectl_tui ./queuectl_tui
RUN python -m venv /opt/queuectl \
    && /opt/queuectl/bin/pip install -c constraints.txt . \
    && rm -rf /src

# Jobs run as this user, never as root; the database lives on the volume.
RUN useradd --system --create-home --home-dir /var/lib/queuectl queuectl
USER queuectl
WORKDIR /var/lib/queuectl
ENV PATH=/opt/queuectl/bin:$PATH \
    QUEUECTL_DB=/var/lib/queuectl/queue.db
VOLUME /var/lib/queuectl

# As PID 1 the pool reaps what its jobs leave behind (it is a child subreaper) and stops
# gracefully on the SIGTERM of `docker stop`: give it time to let running jobs finish
# (docker stop -t 330 for the default 300 s job timeout); a second signal stops them now.
STOPSIGNAL SIGTERM
ENTRYPOINT ["queuectl"]
CMD ["worker", "start", "--count", "2", "--log-format", "json"]
