"""Clients of the vLLM server, as plain strings and specs (pure functions, no Pulumi): the command that
finds the endpoint, the tutorial's curl request and the engine's benchmark client (``vllm bench serve``,
``WorkloadKindInfo.benchmark``). The server's objects are in ``components.workloads.vllm.render``.
"""

from __future__ import annotations

from ...config.resolve import StackPlan
from ...config.workload import serving_scenario
from ...render import gateway
from ...render.benchmark import BenchmarkClient, num_prompts, server_url
from .engine import server_image
from .render import (
    API_KEY_SECRET_NAME,
    NAME,
    PORT,
    PORT_NAME,
    SECRET_KEY,
    SECRET_NAME,
    deployment_timeout_seconds,
    model_id,
    render_server,
    render_service,
    vllm_args,
)
from .spec import API_KEY_SECRET, settings


def endpoint_command(namespace: str) -> str:
    return f"kubectl get service {NAME} -n {namespace} -o jsonpath='{{.status.loadBalancer.ingress[0].ip}}'"


def _completion_body(model: str) -> str:
    """The tutorial's completion request body."""
    return f'{{"model": "{model}", "prompt": "San Francisco is a", "max_tokens": 7, "temperature": 0}}'


def curl_example(plan: StackPlan, namespace: str) -> str:
    """The tutorial's completion request against the Service's load balancer (with the API key,
    read from the stack's secret config, when the endpoint requires one)."""
    body = _completion_body(model_id(plan))
    url = f"http://$({endpoint_command(namespace)}):{PORT}/v1/completions"
    request = f"curl {url} -H \"Content-Type: application/json\" -d '{body}'"
    if settings(plan.config).service.auth == "api-key":
        # The header comes from stdin (curl -H @-), so the key is on no command line (ps shows argv).
        key = f"pulumi config get gke-tpu-llm:{API_KEY_SECRET}"
        return f"{key} | sed 's/^/Authorization: Bearer /' | {request} -H @-"
    return request


def gateway_endpoint_command(backend: gateway.Backend, namespace: str) -> str:
    """The command that prints the gateway's address (its status, once GKE has programmed the load balancer)."""
    return f"kubectl get gateway {backend.gateway} -n {namespace} -o jsonpath='{{.status.addresses[0].value}}'"


def gateway_curl(stack: StackPlan, backend: gateway.Backend, namespace: str) -> str:
    """A completion request through the gateway: ``https://<hostname>`` (public) or the internal address
    (from the VPC). Public: with an IAP identity token for the OAuth client (``gcloud auth
    print-identity-token --audiences=<client id>``, IAP programmatic access), in ``Proxy-Authorization``
    when vLLM's own API key takes ``Authorization``. Tokens and keys come from stdin (``curl -H @-``),
    so none is on a command line."""
    front_door = stack.config.workload.front_door
    url = f"https://{front_door.hostname}" if front_door.public else f"http://$({gateway_endpoint_command(backend, namespace)})"
    body = _completion_body(backend.model)
    request = f"curl {url}/v1/completions -H \"Content-Type: application/json\" -d '{body}'"
    api_key = settings(stack.config).service.auth == "api-key"
    headers = []
    if front_door.public:
        token = "gcloud auth print-identity-token --audiences=\"$(pulumi config get gke-tpu-llm:iapClientId)\""
        headers.append(f'printf "{"Proxy-Authorization" if api_key else "Authorization"}: Bearer %s\\n" "$({token})"')
    if api_key:
        headers.append(f'printf "Authorization: Bearer %s\\n" "$(pulumi config get gke-tpu-llm:{API_KEY_SECRET})"')
    return f"{{ {'; '.join(headers)}; }} | {request} -H @-" if headers else request


def benchmark_client(plan: StackPlan, *, namespace: str, service_account: str) -> BenchmarkClient:
    """``vllm bench serve`` from the server's own image against the Service, with the stack's scenario.

    Flags as defined by vLLM's client (vllm-project/vllm ``vllm/benchmarks/serve.py`` add_cli_args and
    ``vllm/benchmarks/datasets.py`` add_dataset_parser) and as the release the image is built from uses
    them (vllm-project/tpu-inference v0.27.0 ``tests/e2e/benchmarking/safety_model_benchmark.sh`` runs
    ``vllm bench serve --model … --endpoint /v1/completions --dataset-name … --num-prompts … --backend
    vllm``; its ``tests/e2e/benchmarking/inferencex/qwen3.5/bench.sh`` runs InferenceX's
    ``utils/bench_serving/benchmark_serving.py``, not ``vllm bench serve``, with the same flag names for
    the rest: ``--dataset-name random --random-input-len --random-output-len --random-range-ratio
    --num-prompts --max-concurrency --ignore-eos --save-result --percentile-metrics … --result-dir
    --result-filename``): ``--backend vllm`` and ``--endpoint
    /v1/completions`` (the OpenAI completions route the server exposes), ``--dataset-name random`` with
    ``--random-input-len``/``--random-output-len`` and ``--random-range-ratio 0`` (synthetic prompts of
    exactly the scenario's lengths; ``--ignore-eos`` makes every request generate all its output tokens), ``--max-concurrency``
    (requests in flight), ``--percentile-metrics ttft,tpot,itl`` and ``--save-result`` into
    ``--result-dir``/``--result-filename``. The API key, when the endpoint requires one, is read by the
    client from ``OPENAI_API_KEY`` (``vllm/benchmarks/lib/endpoint_request_func.py`` _get_headers), so it
    is on no command line; the tokenizer (the served model's, from the Hugging Face Hub) uses ``HF_TOKEN``.
    """
    scenario = serving_scenario(plan.config)
    if scenario is None:  # the component renders a client only for a stack with a scenario
        raise ValueError("workload.serving is unset: no scenario to benchmark")
    spec = settings(plan.config)
    model = model_id(plan)
    secret_env = {"HF_TOKEN": (SECRET_NAME, SECRET_KEY)}  # huggingface_hub reads HF_TOKEN (gated tokenizer)
    if spec.service.auth == "api-key":
        secret_env["OPENAI_API_KEY"] = (API_KEY_SECRET_NAME, SECRET_KEY)
    args = (
        "vllm",
        "bench",
        "serve",
        "--backend=vllm",
        f"--base-url={server_url(NAME, PORT, namespace)}",
        "--endpoint=/v1/completions",
        f"--model={model}",
        f"--tokenizer={model}",
        "--dataset-name=random",
        f"--random-input-len={scenario.input_tokens}",
        f"--random-output-len={scenario.output_tokens}",
        "--random-range-ratio=0",
        "--ignore-eos",
        f"--max-concurrency={scenario.concurrency}",
        f"--num-prompts={num_prompts(scenario)}",
        "--percentile-metrics=ttft,tpot,itl",
        "--metric-percentiles=50,90,99",
        "--save-result",
        "--result-dir=$(RESULT_DIR)",
        "--result-filename=$(CLIENT_RESULT_FILE)",
    )
    return BenchmarkClient(
        engine="vllm",
        image=server_image(plan.config),
        args=args,
        version_command="python3 -c 'import vllm; print(vllm.__version__)'",
        service=NAME,
        port=PORT,
        port_name=PORT_NAME,
        health_path="/health",
        server_role=NAME,
        ready_timeout_seconds=deployment_timeout_seconds(plan),
        secret_env=secret_env,
        bucket=spec.bucket,
        server_objects=(
            render_server(
                plan,
                namespace=namespace,
                service_account=service_account,
                bucket_name=plan.config.bucket_name(spec.bucket),
            ),
            render_service(plan, namespace=namespace),
        ),
        extra={"modelId": model, "serverArgs": vllm_args(plan)},
    )
