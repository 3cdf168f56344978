"""Corpus management in the browser: create a collection, upload files and watch the job, documents."""

import re

import httpx
import pytest

from tests.ingestion.samples import CORRUPT_PDF
from tests.web.conftest import SKIP_NO_PLAYWRIGHT, shot

expect = pytest.importorskip("playwright.sync_api", reason=SKIP_NO_PLAYWRIGHT).expect
pytestmark = [pytest.mark.integration]


def test_create_collection_upload_three_files_and_watch_two_indexed_one_failed(page, ui_url):
    page.goto(f"{ui_url}/")
    expect(page).to_have_url(re.compile(r"/ui/#?/?"))
    expect(page.get_by_role("heading", name="Collections")).to_be_visible()
    page.get_by_label("Name").fill("ui-upload")
    page.get_by_label("Description").fill("made in the browser")
    page.get_by_label("Strategy").select_option("recursive")
    page.get_by_label("Chunk size (tokens)").fill("128")
    page.get_by_role("button", name="Create collection").click()
    # The first collection of a process loads the embedding model (to learn its dimension): allow time.
    expect(page.get_by_text("Created “ui-upload”.")).to_be_visible(timeout=120_000)
    row = page.locator("#collections-table tr[data-name='ui-upload']")
    expect(row).to_contain_text("recursive, 128 tokens")
    shot(page, "collections-created")

    row.get_by_role("link", name="Upload", exact=True).click()
    expect(page.get_by_role("heading", name="Upload")).to_be_visible()
    expect(page.get_by_label("Collection")).to_have_value(re.compile(".+"))
    # Dropping files adds them to the list (a synthetic drop carries files, not folder entries).
    page.evaluate(
        """() => {
            const data = new DataTransfer();
            data.items.add(new File(["dropped"], "dropped.txt", {type: "text/plain"}));
            document.querySelector("#dropzone").dispatchEvent(new DragEvent("drop", {dataTransfer: data}));
        }"""
    )
    expect(page.locator(".file-list li")).to_have_count(1)
    expect(page.locator(".file-list")).to_contain_text("dropped.txt")
    page.get_by_role("button", name="Clear").click()
    expect(page.locator(".file-list li")).to_have_count(0)
    page.set_input_files(
        "#files",
        [
            {"name": "alpha.txt", "mimeType": "text/plain", "buffer": b"Alpha notes. " * 40},
            {
                "name": "beta.md",
                "mimeType": "text/markdown",
                "buffer": b"# Beta\n\nBeta has a heading. " * 20,
            },
            {"name": "broken.pdf", "mimeType": "application/pdf", "buffer": CORRUPT_PDF},
            # Types no parser reads (the server's list, GET /v1/ingestion/formats) stay here.
            {"name": "setup.exe", "mimeType": "application/octet-stream", "buffer": b"MZ\x90\x00 setup"},
            {"name": "noise.bin", "mimeType": "application/octet-stream", "buffer": bytes(range(256))},
        ],
    )
    expect(page.locator(".file-list li")).to_have_count(3)
    refused = page.get_by_role("list", name="Files refused")
    expect(refused.locator("li[data-path]")).to_have_count(2)
    expect(refused.locator("li[data-path='setup.exe']")).to_contain_text(".exe files cannot be read")
    page.get_by_role("button", name="Upload 3 files").click()

    job = page.locator(".job")
    expect(job.locator(".job-summary")).to_contain_text("3 of 3 documents finished", timeout=180_000)
    expect(job.locator(".done-count")).to_have_text("2 indexed")
    expect(job.locator(".failed-count")).to_have_text("1 failed")
    expect(job.locator("dd[data-stage='indexed']")).to_have_text("2")
    expect(job.locator("dd[data-stage='failed']")).to_have_text("1")
    failed = job.locator("tr[data-source='broken.pdf']")
    expect(failed).to_have_attribute("data-status", "failed")
    expect(failed.locator(".reason")).to_contain_text("PDF")
    expect(failed.locator(".reason")).to_contain_text("permanent")
    # Not a green "succeeded", and no retry offered for a file that can never be read.
    expect(job.locator("h2 .badge")).to_have_text("completed with 1 failure")
    expect(job.get_by_role("button", name=re.compile("Retry|Requeue"))).to_have_count(0)
    expect(job.locator("#permanent-note")).to_contain_text("1 failure is permanent")
    expect(job).not_to_contain_text("started not yet")
    shot(page, "upload-finished")

    # The Jobs page finds it under "with failures", badged the same way.
    page.goto(f"{ui_url}/ui/#/jobs")
    page.get_by_label("Status").select_option(label="with failures")
    rows = page.locator("#jobs-table[data-filter='failures=true'] tbody tr")
    expect(rows.first).to_be_visible()
    assert all(int(n) > 0 for n in rows.evaluate_all("rs => rs.map(r => r.dataset.failed)"))
    expect(rows.filter(has_text="completed with 1 failure").first).to_be_visible()

    page.goto(f"{ui_url}/ui/#/collections")
    expect(page.locator("#collections-table tr[data-name='ui-upload'] td").first).to_have_text("3")


def test_documents_filter_and_failure_reason_then_delete(page, ui_url, corpus):
    collection = corpus["collection"]["id"]
    page.goto(f"{ui_url}/ui/#/documents?collection={collection}")
    rows = page.locator("#documents-table tbody tr")
    expect(rows).to_have_count(4)
    page.get_by_label("Find").fill("otter")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("otters.txt")
    expect(rows.first).to_contain_text("v1")
    page.get_by_label("Find").fill("")
    page.get_by_label("Status").select_option("failed")
    expect(page.get_by_text("No documents match.")).to_be_visible()
    shot(page, "documents-filtered")


def test_document_view_draws_chunk_boundaries_with_span_page_and_tokens(page, ui_url, corpus):
    doc = corpus["documents"]["handbook.md"]
    page.goto(f"{ui_url}/ui/#/documents?collection={corpus['collection']['id']}")
    page.get_by_role("link", name="handbook.md").click()
    expect(page.get_by_role("heading", name="handbook.md")).to_be_visible()
    chunks = page.locator("#chunks-table tbody tr")
    count = doc["metadata"]["chunks"]
    assert count >= 3, doc
    expect(chunks).to_have_count(count)
    expect(page.locator(".chunk-mark")).to_have_count(count)
    expect(page.locator("#doc-text")).to_contain_text("Replace sensor batteries every eighteen months")
    first = chunks.first
    expect(first.locator("td").nth(0)).to_have_text(re.compile(r"^0–\d+$"))  # span
    expect(first.locator("td").nth(2)).to_have_text(re.compile(r"^\d+$"))  # tokens
    expect(page.locator(".seg.overlap").first).to_be_visible()  # fixed windows overlap by 8 tokens
    chunks.nth(2).get_by_role("link").click()
    expect(page.locator(".seg.focus").first).to_be_visible()
    shot(page, "document-view")


def test_edit_a_collection_then_delete_it_after_confirming(page, ui_url, corpus):
    created = httpx.post(f"{ui_url}/v1/collections", json={"name": "ui-scratch"}, timeout=120)
    assert created.status_code == 201, created.text
    page.goto(f"{ui_url}/ui/#/collections")
    row = page.locator("#collections-table tr[data-name='ui-scratch']")
    row.get_by_role("button", name="Edit").click()
    dialog = page.get_by_role("dialog", name="Edit “ui-scratch”")
    dialog.get_by_label("Description").fill("renamed purpose")
    dialog.get_by_label("Chunk size (tokens)").fill("96")
    shot(page, "collection-edit")
    dialog.get_by_role("button", name="Save").click()
    expect(row).to_contain_text("renamed purpose")
    expect(row).to_contain_text("fixed, 96 tokens")

    row.get_by_role("button", name="Delete").click()
    page.get_by_role("button", name="Cancel").click()  # cancelling keeps it
    expect(row).to_be_visible()
    row.get_by_role("button", name="Delete").click()
    shot(page, "collection-delete-confirm")
    page.get_by_role("button", name="Delete collection").click()
    expect(row).to_have_count(0)
    expect(page.locator("#collections-status .notice")).to_be_focused()  # focus is not lost
    assert httpx.get(f"{ui_url}/v1/collections/ui-scratch").status_code == 404


def test_the_job_page_counts_chunks_live_while_a_large_document_embeds(page, ui_url):
    """A document of several embedding groups (`ingestion.embed_group`, 128 texts): the chunk counter
    and the bar move while its groups embed, not only once it is stored."""
    # Distinct sentences: equal chunk texts would re-use one vector instead of being embedded.
    text = " ".join(
        f"Reading {i}: sensor {i % 97} logged {i * 7 % 1009} units in hall {i % 13}." for i in range(2400)
    )
    with httpx.Client(base_url=ui_url, timeout=60) as client:
        body = {
            "name": "web-embed-live",
            "chunking": {"strategy": "fixed", "chunk_size": 48, "chunk_overlap": 8},
        }
        collection = client.post("/v1/collections", json=body)
        assert collection.status_code == 201, collection.text
        files = [("files", ("readings.txt", text.encode(), "text/plain"))]
        job = client.post(f"/v1/collections/{collection.json()['id']}/documents", files=files).json()
    page.goto(f"{ui_url}/ui/#/jobs/{job['job_id']}")
    live = page.locator(".embedding-live")
    expect(live).to_contain_text(re.compile(r"embedding now: [1-9]\d* of \d{3,} chunks"), timeout=240_000)
    counted = int(page.locator(".chunks-count").inner_text().split()[0])
    assert counted > 0
    assert float(page.get_by_label("Job progress").get_attribute("value")) > 0.3  # past "embedding began"
    shot(page, "job-embedding-live")
    expect(page.locator(".job-summary .done-count")).to_have_text("1 indexed", timeout=240_000)
    expect(live).to_have_count(0)
    with httpx.Client(base_url=ui_url, timeout=60) as client:
        stored = client.get(f"/v1/jobs/{job['job_id']}").json()
    assert stored["chunks_embedded"] >= counted and stored["chunks_embedded"] > 3 * 128, stored
    expect(page.locator(".chunks-count")).to_have_text(f"{stored['chunks_embedded']} chunks embedded")
    assert stored["stages"]["embedding_sent"] == stored["stages"]["embedding_planned"] == 0, stored
