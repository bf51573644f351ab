"""The web page at / in a real headless browser (Debian's Chromium and ChromeDriver, driven by
Selenium): type a sentence, read the translation from the page, show its attention. Skipped where
Chromium is not installed (`apt-get install chromium chromium-driver`)."""

import shutil

import pytest

from helpers import Server
from vaswani.config import DecodeConfig, ServeSettings
from vaswani.decoding.text import TextModel, translate
from vaswani.serve import Served, create_app
from vaswani.translation.engine import load_run

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="needs Debian's chromium and chromium-driver"
)


def browser(tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # This machine has no network: no background connections, no first-run work.
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1100,900",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=webdriver.ChromeService(CHROMEDRIVER), options=options)


def test_the_page_translates_what_is_typed_and_shows_attention(numbers_run, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    run = load_run(numbers_run)
    served = [Served(run, "en", "de")]
    server = Server(create_app(settings=ServeSettings(precision="fp32"), served=served))
    driver = browser(tmp_path)
    try:
        driver.get(f"http://127.0.0.1:{server.port}/")
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#target option"))
        assert driver.find_element(By.ID, "source").get_attribute("value") == "en"
        driver.find_element(By.ID, "text").send_keys("271493")
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: d.find_element(By.ID, "translation").text.strip())
        expected = translate(
            TextModel(run.model, run.src_tokenizer, run.tgt_tokenizer), ["271493"], DecodeConfig()
        )[0]
        assert driver.find_element(By.ID, "translation").text == expected
        driver.find_element(By.ID, "show-attention").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#attention td"))
        columns = driver.find_elements(By.CSS_SELECTOR, "#attention th.col")
        assert [c.get_attribute("textContent") for c in columns] == list("271493") + ["</s>"]
        assert driver.find_element(By.ID, "status").text == ""
    finally:
        driver.quit()
        server.stop()


def test_a_file_chosen_on_the_page_comes_back_translated(numbers_run, tmp_path):
    import urllib.request

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    run = load_run(numbers_run)
    served = [Served(run, "en", "de")]
    server = Server(create_app(settings=ServeSettings(precision="fp32"), served=served))
    page = tmp_path / "page.html"
    page.write_text("<p>271493 <b>42</b></p>")
    driver = browser(tmp_path)
    try:
        driver.get(f"http://127.0.0.1:{server.port}/")
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#target option"))
        driver.find_element(By.ID, "file").send_keys(str(page))
        wait.until(lambda d: d.find_element(By.ID, "download").is_displayed())
        link = driver.find_element(By.ID, "download")
        assert link.get_attribute("download") == "page.html"
        with urllib.request.urlopen(link.get_attribute("href")) as response:
            translated = response.read().decode()
        assert translated.startswith("<p>") and "<b>" in translated and "271493" not in translated
        assert driver.find_element(By.ID, "status").text == ""
    finally:
        driver.quit()
        server.stop()
