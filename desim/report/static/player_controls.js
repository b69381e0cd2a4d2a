function desimControls(n, draw, ms) {
  const slider = document.getElementById('step'), play = document.getElementById('play');
  slider.max = n - 1;
  let timer = null;
  function stop() { clearInterval(timer); timer = null; play.textContent = '\u25b6 play'; }
  play.addEventListener('click', () => {
    if (timer) { stop(); return; }
    if (+slider.value >= n - 1) slider.value = 0;
    play.textContent = '\u275a\u275a pause';
    timer = setInterval(() => {
      if (+slider.value >= n - 1) { stop(); return; }
      slider.value = +slider.value + 1; draw(+slider.value);
    }, ms);
  });
  slider.addEventListener('input', () => draw(+slider.value));
  draw(0);
}
