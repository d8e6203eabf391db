"""examples/distributed_notebook/distributed_cpu.ipynb executed by a real Jupyter kernel
(nbclient + ipykernel): its cells define @distributed functions (sent by value, as notebook
code is) and run them through air; the cells' outputs hold the right per-rank values, the
rank-prefixed lines of every rank, and rank 1's exception caught as itself."""
import json

import nbclient
import nbformat
from distributed_fixtures.helpers import REPO, air_json, py_env  # noqa: F401

NOTEBOOK = REPO / "examples" / "distributed_notebook" / "distributed_cpu.ipynb"


def cell_text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_example_notebook_runs_in_a_jupyter_kernel(py_env, air_bin, air_home):  # noqa: F811
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json\nprint('RESULT ' + json.dumps({'all_reduce': list(result), "
        "'run_id': result.run_id}))"))
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(py_env)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    reduce_out, scaled_out, result_out = (cell_text(c) for c in code)
    result = json.loads(result_out.split("RESULT ", 1)[1])
    assert result["all_reduce"] == [6.0, 6.0, 6.0, 6.0]
    assert air_json(air_bin, "get", result["run_id"])["state"] == "SUCCEEDED"
    for rank in range(4):
        node, local = divmod(rank, 2)
        assert (f"[rank {rank}] rank {rank} (node {node}, local rank {local}) sees 6.0"
                in reduce_out), reduce_out
    assert f"[air] run {result['run_id']}: 4/4 ranks running" in reduce_out, reduce_out
    assert "[1, 11]" in scaled_out, scaled_out  # rank * 10 + 1
    assert "caught: rank 1 refuses a negative scale from rank 1" in scaled_out, scaled_out
