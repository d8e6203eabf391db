"""air's Jinja interpreter against transformers' apply_chat_template (jinja2) on chat templates
written in the style of real tokenizer_config.json files — Llama 3.1 (tools, dates, namespace
of system message), Qwen2.5 (tools, tool calls), Mistral and Gemma (raise_exception on bad role
order), Zephyr (multi-line: trim_blocks / lstrip_blocks) — plus a template that exercises the
rest of the supported Jinja (filters, tests, slices, string methods, macros, loop controls,
whitespace control). The rendered text must be identical; templates that raise must raise the
same message in air.
"""
import json
import shutil
import subprocess

import pytest
from transformers import AutoTokenizer

from test_tokenizer_parity import ref_dir  # noqa: F401  (session fixture: reference tokenizers)

LLAMA31 = """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\\n\\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions." }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

QWEN25 = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

MISTRAL = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
           "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
           "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
           "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
           "'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only "
           "user and assistant roles are supported!') }}{% endif %}{% endfor %}")

GEMMA = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role "
         "not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == "
         "'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must "
         "alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == "
         "'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
         "{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
         "'<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
         "{{'<start_of_turn>model\\n'}}{% endif %}")

ZEPHYR = """{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>\\n' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>\\n' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>\\n'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""

KITCHEN_SINK = """{#- every supported construct, once -#}
{%- macro turn(role, text, sep='\\n') -%}
<{{ role | upper }}>{{ sep }}{{ text }}</{{ role }}>
{%- endmacro -%}
{%- set ns = namespace(count=0, roles=[]) -%}
{%- set greeting %}Hello {{ messages | length }} times{% endset -%}
{%- for m in messages if m.role != 'tool' -%}
  {%- set ns.count = ns.count + 1 -%}
  {%- set ns.roles = ns.roles + [m.role] -%}
  {%- if m.content.startswith('skip') %}{% continue %}{% endif -%}
  {%- if m.content == 'stop' %}{% break %}{% endif -%}
  {{ turn(m.role, m.content | trim) }}{% if m.reasoning_content %}[r:{{ m.reasoning_content }}]{% endif %}
  {{- ' #' ~ loop.index ~ '/' ~ loop.length ~ (' first' if loop.first else '') ~ (' last' if loop.last) }}
  {{- ' words=' ~ m.content.split() | length }} {{ m.content[::-1] }} {{ m.content[:3] }} {{ m.content[-2:] }}
  {%+ if m.content is string and m.content | length > 5 and not m.content.endswith('?') %} long{% elif m.content in ['hi', 'yo'] %} greet{% else %} other{% endif %}
{% endfor -%}
{{ ns.count }}|{{ ns.roles | join(',') }}|{{ ns.roles | first }}|{{ ns.roles | last }}|{{ greeting }}
{{ {'b': [1, 2.5, none, true], 'a': 'x"y'} | tojson }}|{{ {'k': [1, {'z': 'é'}]} | tojson(indent=2) }}
{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('; ') }}
{{ (7 // 2) ~ ' ' ~ (7 % 3) ~ ' ' ~ (7 / 2) ~ ' ' ~ (-7 // 2) ~ ' ' ~ (2 * 3 + 1) ~ ' ' ~ ('ab' * 2) }}
{{ undefined_thing | default('dflt') }} {{ '' | default('empty', true) }} {{ none is none }} {{ 3 is odd }}
{{ 'a-b-c'.split('-') }} {{ '  pad  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'Title me'.title() }}|{{ 'a,b'.replace(',', ';') }}
{%- for k, v in {'one': 1, 'two': 2}.items() %} {{ k }}={{ v }}{% endfor %}
{%- for i in range(3) %}{{ i }}{% else %}none{% endfor %}{% for i in [] %}x{% else %} empty{% endfor %}
{% if add_generation_prompt %}<GEN>{% endif %}"""

TEMPLATES = {"llama31": LLAMA31, "qwen25": QWEN25, "mistral": MISTRAL, "gemma": GEMMA,
             "zephyr": ZEPHYR, "kitchen_sink": KITCHEN_SINK}

CONVERSATIONS = [
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "  Hello there!  "}],
    [{"role": "system", "content": " Be terse. "}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "skip this one"},
     {"role": "assistant", "content": "Okay.\n\nDone"}],
    [{"role": "user", "content": "日本語で？ 😀"}, {"role": "assistant", "content": "はい、もちろん。"},
     {"role": "user", "content": "stop"}, {"role": "assistant", "content": "after stop"}],
    [{"role": "user", "content": "Weather in Paris?"},
     {"role": "assistant", "content": "", "thinking": "Call the tool.",
      "tool_calls": [{"type": "function", "function": {"name": "weather",
                                                      "arguments": {"city": "Paris"}}}]},
     {"role": "tool", "content": "{\"temp\": 21}"},
     {"role": "assistant", "content": "It is 21°C."}],
]


def make_dir(tmp_path, ref_dir, name, template):  # noqa: F811
    d = tmp_path / name
    d.mkdir()
    shutil.copy(ref_dir / "llama3" / "tokenizer.json", d / "tokenizer.json")
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
              "chat_template": template, "tokenizer_class": "PreTrainedTokenizerFast"}
    (d / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return d


def air_render(air_bin, tok_dir, tmp_path, conv, gen):
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"messages": conv, "add_generation_prompt": gen},
                               ensure_ascii=False) + "\n", encoding="utf-8")
    proc = subprocess.run([air_bin, "tokenize", "--tokenizer", tok_dir, "--input", path, "--chat",
                           "--render-only"],
                          capture_output=True, timeout=60)
    if proc.returncode != 0:
        return None, proc.stderr.decode()
    return json.loads(proc.stdout.decode().split("\n")[0]), None


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_jinja_renders_like_transformers(air_bin, ref_dir, tmp_path, name):  # noqa: F811
    tok_dir = make_dir(tmp_path, ref_dir, name, TEMPLATES[name])
    hf = AutoTokenizer.from_pretrained(str(tok_dir))
    compared = 0
    for conv in CONVERSATIONS:
        plain = conv  # all keys reach the template (tool_calls here)
        for gen in [False, True]:
            try:
                want = hf.apply_chat_template(plain, tokenize=False, add_generation_prompt=gen)
                error = None
            except Exception as e:  # raise_exception in the template
                want, error = None, str(e)
            got, air_error = air_render(air_bin, tok_dir, tmp_path, plain, gen)
            if error is not None:
                assert air_error is not None and error in air_error, (name, error, air_error)
                continue
            assert air_error is None, (name, air_error)
            assert got["text"] == want, (name, plain)
            compared += 1
    assert compared >= 2
